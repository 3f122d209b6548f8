// RUN: gnomon-opt %s | gnomon-opt | filecheck %s
// RUN: GNOMON_ROUNDTRIP

// An rt program: a weight, two arena buffers (the second written in place over the first), a
// view, and launches of outlined kernels.

kernel.func @conv_0(%x: tensor<1x3x4x4xf32>, %w: tensor<2x3x1x1xf32>) -> tensor<1x2x4x4xf32> attributes {kind = "library", callee = "aten.convolution"} {
  %y = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x4x4xf32>, tensor<2x3x1x1xf32>) -> tensor<1x2x4x4xf32>
  kernel.yield %y : tensor<1x2x4x4xf32>
}
kernel.func @relu_1(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0, 0, 0], vector = 8, order = [0, 1, 2, 3], threads = 2>} {
  %r = graph.relu %x : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  kernel.yield %r : tensor<1x2x4x4xf32>
}

// CHECK-LABEL: func.func @main(%{{.*}}: memref<1x3x4x4xf32>) -> memref<1x32xf32> attributes {rt.arena_size = 128 : i64} {
// CHECK-NEXT:    %[[W:.*]] = rt.constant dense<5.000000e-01> : tensor<2x3x1x1xf32> -> memref<2x3x1x1xf32>
// CHECK-NEXT:    %[[B0:.*]] = rt.buffer 0 : memref<1x2x4x4xf32>
// CHECK-NEXT:    rt.launch @conv_0(%{{.*}}, %[[W]]) outs(%[[B0]]) : (memref<1x3x4x4xf32>, memref<2x3x1x1xf32>) -> (memref<1x2x4x4xf32>)
// CHECK-NEXT:    %[[B1:.*]] = rt.buffer 0 : memref<1x2x4x4xf32>
// CHECK-NEXT:    rt.launch @relu_1(%[[B0]]) outs(%[[B1]]) : (memref<1x2x4x4xf32>) -> (memref<1x2x4x4xf32>)
// CHECK-NEXT:    %[[V:.*]] = rt.view %[[B1]] : memref<1x2x4x4xf32> -> memref<1x32xf32>
// CHECK-NEXT:    %{{.*}} = rt.view %[[B1]] [16] : memref<1x2x4x4xf32> -> memref<1x1x4x4xf32>
// CHECK-NEXT:    func.return %[[V]] : memref<1x32xf32>
func.func @main(%x: memref<1x3x4x4xf32>) -> memref<1x32xf32> attributes {rt.arena_size = 128 : i64} {
  %w = rt.constant dense<0.5> : tensor<2x3x1x1xf32> -> memref<2x3x1x1xf32>
  %b0 = rt.buffer 0 : memref<1x2x4x4xf32>
  rt.launch @conv_0(%x, %w) outs(%b0) : (memref<1x3x4x4xf32>, memref<2x3x1x1xf32>) -> (memref<1x2x4x4xf32>)
  %b1 = rt.buffer 0 : memref<1x2x4x4xf32>
  rt.launch @relu_1(%b0) outs(%b1) : (memref<1x2x4x4xf32>) -> (memref<1x2x4x4xf32>)
  %v = rt.view %b1 : memref<1x2x4x4xf32> -> memref<1x32xf32>
  %second_channel = rt.view %b1 [16] : memref<1x2x4x4xf32> -> memref<1x1x4x4xf32>
  func.return %v : memref<1x32xf32>
}
