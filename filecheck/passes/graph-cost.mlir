// RUN: gnomon-opt %s -p 'graph-cost{device=h100}' | filecheck %s

// Analytical costs on the H100 SXM datasheet (h100.toml; not measured): 132 SMs, fp32 peak 67e12 FLOP/s,
// L1/shared 256 KiB per SM, L2 50 MiB at 10.1e12 B/s, HBM3 3.35e12 B/s, launch 4e-6 s; the GPU defaults of
// analytical.Efficiency: gemm 0.8, tiles from 256x128 down to 32x32, 32 extra K steps per tile, vector 0.5,
// stream 0.85.
// time = launch + max(compute, memory); one SM computes at r = 67e12 / 132 * 0.8 = 4.06061e11 FLOP/s.
//
// matmul 1024^3, f32 (roofline 3.20520e-05 s):
//   tiles: tiles of 8192 outputs make 128 tiles, one wave of 132 SMs; bigger tiles leave SMs idle, smaller ones
//     take more waves for the same time; of the 8192-output tiles, 128x64 re-reads the least
//   compute: 2 * 128 * 64 * (1024 + 32) / r = 4.26082e-05 s
//   memory: 12582912 B fit L2; each tile reads its A rows and B columns into shared memory, so A is read
//     1024 / 64 = 16 times and B 1024 / 128 = 8 times: (16 + 8 + 1) * 4 MiB / 10.1e12 / 0.85 = 1.22140e-05 s
//   time = 4e-6 + 4.26082e-05 = 4.66082e-05 s, compute-bound
// conv 1x64x56x56 * 64x64x3x3, an implicit GEMM m = 3136 pixels, n = 64 channels, k = 64 * 9 = 576
//     (roofline 3.45091e-06 s):
//   tiles: 64x32, ceil(3136 / 64) * 2 = 98 of them in one wave
//   compute: 2 * 64 * 32 * (576 + 32) / r = 6.13299e-06 s
//   memory: the input is read 64 / 32 = 2 times, the weight ceil(3136 / 64) = 49 times:
//     (2 * 802816 + 49 * 147456 + 802816) / 10.1e12 / 0.85 = 1.12217e-06 s < compute
//   time = 4e-6 + 6.13299e-06 = 1.01330e-05 s, compute-bound
// relu, 200704 elements (roofline 4.79293e-07 s): 1605632 B stream from L2, where they fit:
//   1605632 / (10.1e12 * 0.85) = 1.87028e-07 s; compute 200704 / (67e12 * 0.5) = 5.99e-09 s
//   time = 4e-6 + 1.87028e-07 = 4.18703e-06 s, memory-bound
// reshape: a view, no kernel.

// CHECK: builtin.module attributes {gnomon.device = "h100"}
// CHECK-LABEL: func.func @ops(
// CHECK-NEXT: graph.matmul
// CHECK-SAME: {gnomon.flops = 2147483648 : i64, gnomon.bytes = 12582912 : i64, gnomon.intensity = 1.706670e+02 : f64, gnomon.time_s = 4.660820e-05 : f64, gnomon.bound = "compute", gnomon.roofline_s = 3.205200e-05 : f64, gnomon.model = "gemm"}
// CHECK-NEXT: graph.conv
// CHECK-SAME: groups = 1 : i64, gnomon.flops = 231211008 : i64, gnomon.bytes = 1753088 : i64, gnomon.intensity = 1.318880e+02 : f64, gnomon.time_s = 1.013300e-05 : f64, gnomon.bound = "compute", gnomon.roofline_s = 3.450910e-06 : f64, gnomon.model = "conv"}
// CHECK-NEXT: graph.relu
// CHECK-SAME: {gnomon.flops = 200704 : i64, gnomon.bytes = 1605632 : i64, gnomon.intensity = 1.250000e-01 : f64, gnomon.time_s = 4.187030e-06 : f64, gnomon.bound = "memory", gnomon.roofline_s = 4.792930e-07 : f64, gnomon.model = "stream"}
// CHECK-NEXT: graph.reshape
// CHECK-SAME: {gnomon.flops = 0 : i64, gnomon.bytes = 0 : i64, gnomon.intensity = 0.000000e+00 : f64, gnomon.time_s = 0.000000e+00 : f64, gnomon.bound = "memory", gnomon.roofline_s = 0.000000e+00 : f64, gnomon.model = "view"}
func.func @ops(%a: tensor<1024x1024xf32>, %b: tensor<1024x1024xf32>, %x: tensor<1x64x56x56xf32>, %w: tensor<64x64x3x3xf32>)
    -> (tensor<1024x1024xf32>, tensor<64x3136xf32>) {
  %0 = graph.matmul %a, %b : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  %1 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}
      : (tensor<1x64x56x56xf32>, tensor<64x64x3x3xf32>) -> tensor<1x64x56x56xf32>
  %2 = graph.relu %1 : (tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>
  %3 = graph.reshape %2 : (tensor<1x64x56x56xf32>) -> tensor<64x3136xf32>
  func.return %0, %3 : tensor<1024x1024xf32>, tensor<64x3136xf32>
}
