// RUN: gnomon-opt %s -p 'graph-layout{device=generic-cpu}' | filecheck %s
// RUN: gnomon-opt %s -p 'graph-layout{device=generic-cpu},graph-fuse{device=generic-cpu threads=2},graph-to-kernel{threads=2}' | filecheck %s --check-prefix=KERNEL

// A 3x3 convolution, its relu and a max pool: channels-last saves oneDNN's reorders of both activations and runs
// gnomon's generated convolution and pool, so the region turns. The input is transposed in once, the pool's result back once; the relu is rewritten on the
// channels-last shape and the bias keeps its form (the convolution's own operand).

// CHECK-LABEL: func.func @conv_pool(
// CHECK:         %[[IN:.*]] = graph.transpose %{{.*}} {permutation = array<i64: 0, 2, 3, 1>} : (tensor<1x32x56x56xf32>) -> tensor<1x56x56x32xf32>
// CHECK:         %[[C:.*]] = graph.conv %[[IN]], %{{.*}}, %{{.*}} {{{.*}}layout = "nhwc", gnomon.layout = {region = 0 : i64, layout = "nhwc", entries = 1 : i64, exits = 1 : i64, nchw_s = {{.*}} : f64, nhwc_s = {{.*}} : f64}} : (tensor<1x56x56x32xf32>, tensor<64x32x3x3xf32>, tensor<64xf32>) -> tensor<1x56x56x64xf32>
// CHECK-NEXT:    %[[R:.*]] = graph.relu %[[C]] : (tensor<1x56x56x64xf32>) -> tensor<1x56x56x64xf32>
// CHECK-NEXT:    %[[P:.*]] = graph.max_pool %[[R]] {{{.*}}layout = "nhwc"{{.*}}} : (tensor<1x56x56x64xf32>) -> tensor<1x28x28x64xf32>
// CHECK-NEXT:    %[[OUT:.*]] = graph.transpose %[[P]] {permutation = array<i64: 0, 3, 1, 2>} : (tensor<1x28x28x64xf32>) -> tensor<1x64x28x28xf32>
// CHECK-NEXT:    func.return %[[OUT]]
// KERNEL-LABEL: func.func @conv_pool(
// KERNEL:         kernel.generated "transpose_0"
// KERNEL:         kernel.generated "conv_relu_1"
// KERNEL:         kernel.generated "max_pool_2"
// KERNEL:         kernel.generated "transpose_3"
func.func @conv_pool(%x: tensor<1x32x56x56xf32>) -> tensor<1x64x28x28xf32> {
  %w = graph.constant {value = dense<0.1> : tensor<64x32x3x3xf32>} : () -> tensor<64x32x3x3xf32>
  %b = graph.constant {value = dense<0.1> : tensor<64xf32>} : () -> tensor<64xf32>
  %c = graph.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x32x56x56xf32>, tensor<64x32x3x3xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
  %r = graph.relu %c : (tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>
  %p = graph.max_pool %r {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x64x56x56xf32>) -> tensor<1x64x28x28xf32>
  func.return %p : tensor<1x64x28x28xf32>
}

// A squeeze-and-excitation tail: the global pool becomes a mean over the channels-last spatial dims, the constant
// channel scale is permuted here (its rank-3 form aligned to rank 4 first), and the pooled vector leaves the region
// as a reshape: only unit dims move.

// CHECK-LABEL: func.func @squeeze_excite(
// CHECK-NOT:     tensor<96x1x1xf32>
// CHECK:         graph.constant {value = dense<2.000000e+00> : tensor<1x1x1x96xf32>}
// CHECK:         graph.conv {{.*}}layout = "nhwc"
// CHECK:         %[[M:.*]] = graph.reduce_mean %{{.*}} {axes = array<i64: 1, 2>, keepdims = true} : (tensor<1x112x112x96xf32>) -> tensor<1x1x1x96xf32>
// CHECK-NEXT:    %[[S:.*]] = graph.mul %[[M]], %{{.*}} : (tensor<1x1x1x96xf32>, tensor<1x1x1x96xf32>) -> tensor<1x1x1x96xf32>
// CHECK-NEXT:    %{{.*}} = graph.reshape %[[S]] : (tensor<1x1x1x96xf32>) -> tensor<1x96x1x1xf32>
// CHECK-NOT:     graph.transpose
func.func @squeeze_excite(%x: tensor<1x96x112x112xf32>) -> tensor<1x96x1x1xf32> {
  %w = graph.constant {value = dense<0.1> : tensor<96x1x3x3xf32>} : () -> tensor<96x1x3x3xf32>
  %s = graph.constant {value = dense<2.0> : tensor<96x1x1xf32>} : () -> tensor<96x1x1xf32>
  %c = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 96 : i64} : (tensor<1x96x112x112xf32>, tensor<96x1x3x3xf32>) -> tensor<1x96x112x112xf32>
  %g = graph.global_avg_pool %c : (tensor<1x96x112x112xf32>) -> tensor<1x96x1x1xf32>
  %m = graph.mul %g, %s : (tensor<1x96x1x1xf32>, tensor<96x1x1xf32>) -> tensor<1x96x1x1xf32>
  func.return %m : tensor<1x96x1x1xf32>
}

// A 1x1 convolution alone gains nothing channels-last (BLAS multiplies either layout as it is), so the two
// transposes around it would be pure cost: the region stays channels-first, and says so.

// CHECK-LABEL: func.func @pointwise_only(
// CHECK-NOT:     graph.transpose
// CHECK:         graph.conv {{.*}}gnomon.layout = {region = {{.*}}, layout = "nchw", entries = 1 : i64, exits = 1 : i64
// CHECK-NOT:     layout = "nhwc"
func.func @pointwise_only(%x: tensor<1x64x28x28xf32>) -> tensor<1x128x28x28xf32> {
  %w = graph.constant {value = dense<0.1> : tensor<128x64x1x1xf32>} : () -> tensor<128x64x1x1xf32>
  %c = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x64x28x28xf32>, tensor<128x64x1x1xf32>) -> tensor<1x128x28x28xf32>
  func.return %c : tensor<1x128x28x28xf32>
}

// Concatenation along channels is along the last dim channels-last. Of two images it is a copy either way (of one,
// channels-first, the runtime writes its inputs in place, which the decision prices).

// CHECK-LABEL: func.func @concat(
// CHECK:         graph.concat {{.*}} {axis = 3 : i64{{.*}}} : (tensor<2x56x56x64xf32>, tensor<2x56x56x64xf32>) -> tensor<2x56x56x128xf32>
// CHECK-NEXT:    graph.max_pool {{.*}}layout = "nhwc"
func.func @concat(%x: tensor<2x64x56x56xf32>) -> tensor<2x128x28x28xf32> {
  %w = graph.constant {value = dense<0.1> : tensor<64x64x3x3xf32>} : () -> tensor<64x64x3x3xf32>
  %a = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x64x56x56xf32>, tensor<64x64x3x3xf32>) -> tensor<2x64x56x56xf32>
  %b = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x64x56x56xf32>, tensor<64x64x3x3xf32>) -> tensor<2x64x56x56xf32>
  %c = graph.concat %a, %b {axis = 1 : i64} : (tensor<2x64x56x56xf32>, tensor<2x64x56x56xf32>) -> tensor<2x128x56x56xf32>
  %p = graph.max_pool %c {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<2x128x56x56xf32>) -> tensor<2x128x28x28xf32>
  func.return %p : tensor<2x128x28x28xf32>
}
