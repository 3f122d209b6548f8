// RUN: gnomon-opt %s -p 'graph-to-kernel{threads=2}' | filecheck %s

// A convolution takes its bias, residual add and relu into one library call (oneDNN's fused
// convolution), which names the ops it fuses as its epilogue; the weights stay outside, as operands.

// CHECK-LABEL: func.func @residual_block(
// CHECK-SAME:      %[[X:.*]]: tensor<1x3x8x8xf32>, %[[R:.*]]: tensor<1x4x8x8xf32>)
// CHECK-NEXT:    %[[W:.*]] = graph.constant
// CHECK-NEXT:    %[[B:.*]] = graph.constant
// CHECK-NEXT:    %[[Y:.*]] = kernel.library "mkldnn._convolution_pointwise" epilogue ["add", "relu"](%[[X]], %[[W]], %[[B]], %[[R]])
// CHECK-NEXT:    ^{{.*}}(%[[X1:.*]]: tensor<1x3x8x8xf32>, %[[W1:.*]]: tensor<4x3x3x3xf32>, %[[B1:.*]]: tensor<4xf32>, %[[R1:.*]]: tensor<1x4x8x8xf32>):
// CHECK-NEXT:      %[[C:.*]] = graph.conv %[[X1]], %[[W1]], %[[B1]]
// CHECK-NEXT:      %[[A:.*]] = graph.add %[[C]], %[[R1]]
// CHECK-NEXT:      %[[Z:.*]] = graph.relu %[[A]]
// CHECK-NEXT:      kernel.yield %[[Z]] : tensor<1x4x8x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]] : tensor<1x4x8x8xf32>
func.func @residual_block(%x: tensor<1x3x8x8xf32>, %r: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %w = graph.constant {value = dense<0.5> : tensor<4x3x3x3xf32>} : () -> tensor<4x3x3x3xf32>
  %b = graph.constant {value = dense<0.1> : tensor<4xf32>} : () -> tensor<4xf32>
  %c = graph.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %a = graph.add %c, %r : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %y = graph.relu %a : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}

// Elementwise ops on one shape fuse into one generated kernel, broadcast operands included; the
// schedule covers the result's loops. The transpose changes shape, so it is a kernel of its own, its
// two inner loops tiled 32x32.

// CHECK-LABEL: func.func @elementwise_chain(
// CHECK-NEXT:    %[[T:.*]] = kernel.generated "add_tanh_0"(%{{.*}}, %{{.*}}) schedule <tile = [0, 0], vector = 8, order = [0, 1], threads = 2> : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    ^{{.*}}(%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>):
// CHECK-NEXT:      %[[S:.*]] = graph.add %[[A]], %[[B]]
// CHECK-NEXT:      %[[H:.*]] = graph.tanh %[[S]]
// CHECK-NEXT:      kernel.yield %[[H]] : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[U:.*]] = kernel.generated "transpose_1"(%[[T]]) schedule <tile = [32, 32], vector = 8, order = [0, 1], threads = 2>
// CHECK-NEXT:    ^{{.*}}(%[[I:.*]]: tensor<4x8xf32>):
// CHECK-NEXT:      %[[P:.*]] = graph.transpose %[[I]] {permutation = array<i64: 1, 0>}
// CHECK-NEXT:      kernel.yield %[[P]] : tensor<8x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[U]] : tensor<8x4xf32>
func.func @elementwise_chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<8x4xf32> {
  %s = graph.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %t = graph.tanh %s : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %u = graph.transpose %t {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %u : tensor<8x4xf32>
}

// An intermediate with a second user ends its kernel (every kernel has one result); that user
// reads it as an operand. Reshapes stay outside kernels: the runtime makes them views.

// CHECK-LABEL: func.func @shared_value(
// CHECK-NEXT:    %[[E:.*]] = kernel.generated "exp_0"(%{{.*}})
// CHECK:         %[[M:.*]] = kernel.generated "neg_mul_1"(%[[E]])
// CHECK-NEXT:    ^{{.*}}(%[[E1:.*]]: tensor<4x8xf32>):
// CHECK-NEXT:      %[[N:.*]] = graph.neg %[[E1]]
// CHECK-NEXT:      %{{.*}} = graph.mul %[[E1]], %[[N]]
// CHECK:         %[[V:.*]] = graph.reshape %[[M]] : (tensor<4x8xf32>) -> tensor<32xf32>
// CHECK-NEXT:    %[[Q:.*]] = kernel.generated "reduce_sum_2"(%[[V]])
// CHECK:         func.return %[[Q]] : tensor<1xf32>
func.func @shared_value(%x: tensor<4x8xf32>) -> tensor<1xf32> {
  %e = graph.exp %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = graph.neg %e : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = graph.mul %e, %n : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %v = graph.reshape %m : (tensor<4x8xf32>) -> tensor<32xf32>
  %q = graph.reduce_sum %v {axes = array<i64: 0>, keepdims = true} : (tensor<32xf32>) -> tensor<1xf32>
  func.return %q : tensor<1xf32>
}

// A transpose of a matmul operand's last two dims joins the matmul's kernel, where BLAS reads it as a
// transposed view (DLRM's interaction): the kernel lists that matmul operand as transposed. A
// transpose with a second user is computed.

// CHECK-LABEL: func.func @transposed_operand(
// CHECK-SAME:      %[[Z:.*]]: tensor<4x3x8xf32>)
// CHECK-NEXT:    %[[D:.*]] = kernel.library "aten.matmul" transposed [1](%[[Z]]) : (tensor<4x3x8xf32>) -> tensor<4x3x3xf32> {
// CHECK-NEXT:    ^{{.*}}(%[[Z1:.*]]: tensor<4x3x8xf32>):
// CHECK-NEXT:      %[[T:.*]] = graph.transpose %[[Z1]] {permutation = array<i64: 0, 2, 1>}
// CHECK-NEXT:      %[[M:.*]] = graph.matmul %[[Z1]], %[[T]]
// CHECK-NEXT:      kernel.yield %[[M]] : tensor<4x3x3xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[U:.*]] = kernel.generated "transpose_1"(%[[D]])
// CHECK:         kernel.library "aten.matmul"(%[[D]], %[[U]])
// CHECK:         kernel.generated "add_3"(%[[U]],
func.func @transposed_operand(%z: tensor<4x3x8xf32>) -> (tensor<4x3x3xf32>, tensor<4x3x3xf32>) {
  %t = graph.transpose %z {permutation = array<i64: 0, 2, 1>} : (tensor<4x3x8xf32>) -> tensor<4x8x3xf32>
  %d = graph.matmul %z, %t : (tensor<4x3x8xf32>, tensor<4x8x3xf32>) -> tensor<4x3x3xf32>
  %u = graph.transpose %d {permutation = array<i64: 0, 2, 1>} : (tensor<4x3x3xf32>) -> tensor<4x3x3xf32>
  %e = graph.matmul %d, %u : (tensor<4x3x3xf32>, tensor<4x3x3xf32>) -> tensor<4x3x3xf32>
  %f = graph.add %u, %e : (tensor<4x3x3xf32>, tensor<4x3x3xf32>) -> tensor<4x3x3xf32>
  func.return %e, %f : tensor<4x3x3xf32>, tensor<4x3x3xf32>
}

// A reduction over trailing axes takes the elementwise ops before it (computed as it reads them) and an
// epilogue that returns to its input's shape, reading each row's reduced value: RMS norm is one kernel.

// CHECK-LABEL: func.func @rms_norm(
// CHECK-NEXT:    %[[EPS:.*]] = graph.constant
// CHECK-NEXT:    %[[Y:.*]] = kernel.generated "mul_reduce_mean_add_rsqrt_mul_mul_0"({{.*}}) schedule
// CHECK:           graph.reduce_mean
// CHECK:           kernel.yield %{{.*}} : tensor<4x64xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[Y]] : tensor<4x64xf32>
func.func @rms_norm(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> tensor<4x64xf32> {
  %sq = graph.mul %x, %x : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %ms = graph.reduce_mean %sq {axes = array<i64: -1>, keepdims = true} : (tensor<4x64xf32>) -> tensor<4x1xf32>
  %eps = graph.constant {value = dense<1.0e-06> : tensor<f32>} : () -> tensor<f32>
  %v = graph.add %ms, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r = graph.rsqrt %v : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %n = graph.mul %x, %r : (tensor<4x64xf32>, tensor<4x1xf32>) -> tensor<4x64xf32>
  %y = graph.mul %n, %w : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  func.return %y : tensor<4x64xf32>
}

// A transpose that keeps its last dim last (a transformer's head split) reads and writes whole rows: no tiles.

// CHECK-LABEL: func.func @head_split(
// CHECK-NEXT:    %{{.*}} = kernel.generated "transpose_0"(%{{.*}}) schedule <tile = [0, 0, 0], vector = 8, order = [0, 1, 2], threads = 2>
func.func @head_split(%x: tensor<64x12x64xf32>) -> tensor<12x64x64xf32> {
  %t = graph.transpose %x {permutation = array<i64: 1, 0, 2>} : (tensor<64x12x64xf32>) -> tensor<12x64x64xf32>
  func.return %t : tensor<12x64x64xf32>
}
