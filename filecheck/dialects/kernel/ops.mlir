// RUN: gnomon-opt %s | gnomon-opt | filecheck %s
// RUN: GNOMON_ROUNDTRIP

// The kernel ops in their custom forms: an inline generated kernel with its schedule, an inline
// library kernel, and an outlined kernel.func of each kind.

// CHECK-LABEL: func.func @inline_kernels(
func.func @inline_kernels(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %{{.*}} = kernel.generated "add_relu_0"(%{{.*}}, %{{.*}}) schedule <tile = [0, 32], vector = 8, order = [0, 1], threads = 2> : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: ^{{.*}}(%[[X:.*]]: tensor<4x8xf32>, %[[Y:.*]]: tensor<8xf32>):
  // CHECK-NEXT:   %[[S:.*]] = graph.add %[[X]], %[[Y]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT:   %[[R:.*]] = graph.relu %[[S]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT:   kernel.yield %[[R]] : tensor<4x8xf32>
  // CHECK-NEXT: }
  %y = kernel.generated "add_relu_0" (%a, %b) schedule <tile = [0, 32], vector = 8, order = [0, 1], threads = 2> : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: tensor<4x8xf32>, %z: tensor<8xf32>):
    %s = graph.add %x, %z : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r = graph.relu %s : (tensor<4x8xf32>) -> tensor<4x8xf32>
    kernel.yield %r : tensor<4x8xf32>
  }
  // CHECK-NEXT: %{{.*}} = kernel.library "aten.softmax"(%{{.*}}) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK:        graph.softmax
  // CHECK:        kernel.yield
  %l = kernel.library "aten.softmax" (%y) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: tensor<4x8xf32>):
    %r = graph.softmax %x {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    kernel.yield %r : tensor<4x8xf32>
  }
  func.return %l : tensor<4x8xf32>
}

// CHECK-LABEL: kernel.func @relu_1(%{{.*}}: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [1, 0], threads = 1>} {
kernel.func @relu_1(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [1, 0], threads = 1>} {
  %r = graph.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  kernel.yield %r : tensor<4x8xf32>
}

// CHECK-LABEL: kernel.func @matmul_2(%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<8x2xf32>) -> tensor<4x2xf32> attributes {kind = "library", callee = "aten.mm"} {
kernel.func @matmul_2(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> tensor<4x2xf32> attributes {kind = "library", callee = "aten.mm"} {
  %r = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  kernel.yield %r : tensor<4x2xf32>
}
