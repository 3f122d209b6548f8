// RUN: gnomon-opt %s | gnomon-opt | filecheck %s

// ±inf and nan constants print in the quoted raw-data form and read back as the same floats.
// xDSL 0.75's own printer writes them as bare bit patterns (`dense<0xff800000>`), which its parser
// reads back as integers, so the generic form (--print-op-generic) cannot round-trip them.

func.func @non_finite() -> (tensor<2xf32>, tensor<2xf32>, tensor<f32>) {
  // CHECK-LABEL: func.func @non_finite(
  %neg_inf = graph.constant {value = dense<"0x000080FF"> : tensor<2xf32>} : () -> tensor<2xf32>
  // CHECK-NEXT: graph.constant {value = dense<"0x000080FF"> : tensor<2xf32>} : () -> tensor<2xf32>
  %mixed = graph.constant {value = dense<"0x0000C07F0000803F"> : tensor<2xf32>} : () -> tensor<2xf32>
  // CHECK-NEXT: graph.constant {value = dense<"0x0000C07F0000803F"> : tensor<2xf32>} : () -> tensor<2xf32>
  %nan = graph.constant {value = dense<"0x0000C07F"> : tensor<f32>} : () -> tensor<f32>
  // CHECK-NEXT: graph.constant {value = dense<"0x0000C07F"> : tensor<f32>} : () -> tensor<f32>
  func.return %neg_inf, %mixed, %nan : tensor<2xf32>, tensor<2xf32>, tensor<f32>
}
