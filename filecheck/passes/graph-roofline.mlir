// RUN: gnomon-opt %s -p 'graph-roofline{device=h100}' | filecheck %s

// Roofline figures on the H100 SXM datasheet (h100.toml; not measured): fp32 peak P = 67e12 FLOP/s,
// HBM3 bandwidth B = 3.35e12 B/s. time = max(flops / P, bytes / B); bound is the larger side.
//
// matmul 1024x1024 @ 1024x1024, f32:
//   flops = 2 * 1024^3                    = 2147483648
//   bytes = 3 matrices * 1024^2 * 4       = 12582912
//   intensity = 2147483648 / 12582912     = 170.667
//   flops / P = 3.20520e-05 > bytes / B = 3.75609e-06: compute-bound, 3.20520e-05 s
// conv 1x64x56x56, 64x64x3x3 weight, stride 1, pad 1 (FlopCounterMode's count):
//   flops = 2 * N * C_out * 56 * 56 * C_in * 3 * 3 = 2 * 64 * 3136 * 64 * 9 = 231211008
//   bytes = 4 * (input 200704 + weight 36864 + result 200704)              = 1753088
//   intensity = 131.888; flops / P = 3.45091e-06 > bytes / B = 5.23310e-07: compute-bound
// relu on the conv's result, 200704 elements: 1 FLOP each
//   flops = 200704, bytes = 4 * 2 * 200704 = 1605632, intensity = 0.125
//   flops / P = 2.99558e-09 < bytes / B = 4.79293e-07: memory-bound
// reshape: a view, it moves nothing.

// CHECK: builtin.module attributes {gnomon.device = "h100"}
// CHECK-LABEL: func.func @ops(
// CHECK-NEXT: graph.matmul
// CHECK-SAME: {gnomon.flops = 2147483648 : i64, gnomon.bytes = 12582912 : i64, gnomon.intensity = 1.706670e+02 : f64, gnomon.time_s = 3.205200e-05 : f64, gnomon.bound = "compute"}
// CHECK-NEXT: graph.conv
// CHECK-SAME: groups = 1 : i64, gnomon.flops = 231211008 : i64, gnomon.bytes = 1753088 : i64, gnomon.intensity = 1.318880e+02 : f64, gnomon.time_s = 3.450910e-06 : f64, gnomon.bound = "compute"}
// CHECK-NEXT: graph.relu
// CHECK-SAME: {gnomon.flops = 200704 : i64, gnomon.bytes = 1605632 : i64, gnomon.intensity = 1.250000e-01 : f64, gnomon.time_s = 4.792930e-07 : f64, gnomon.bound = "memory"}
// CHECK-NEXT: graph.reshape
// CHECK-SAME: {gnomon.flops = 0 : i64, gnomon.bytes = 0 : i64, gnomon.intensity = 0.000000e+00 : f64, gnomon.time_s = 0.000000e+00 : f64, gnomon.bound = "memory"}
func.func @ops(%a: tensor<1024x1024xf32>, %b: tensor<1024x1024xf32>, %x: tensor<1x64x56x56xf32>, %w: tensor<64x64x3x3xf32>)
    -> (tensor<1024x1024xf32>, tensor<64x3136xf32>) {
  %0 = graph.matmul %a, %b : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  %1 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}
      : (tensor<1x64x56x56xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x56x56xf32>
  %2 = graph.relu %1 : (tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>
  %3 = graph.reshape %2 : (tensor<1x64x56x56xf32>) -> tensor<64x3136xf32>
  func.return %0, %3 : tensor<1024x1024xf32>, tensor<64x3136xf32>
}
