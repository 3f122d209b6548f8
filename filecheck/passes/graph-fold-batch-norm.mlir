// RUN: gnomon-opt %s -p graph-fold-batch-norm | filecheck %s
// RUN: gnomon-opt %s -p graph-fold-batch-norm --print-debuginfo | filecheck %s --check-prefix=LOC

// Every case has sqrt(var + eps) = [2, 4]; with gamma = [1, 2] the per-channel factor s is [0.5, 0.5].
// The folded weight is w * s per output channel, the bias (b - mean) * s + beta, and the
// conv keeps its location.

// CHECK-LABEL: func.func @conv_without_bias(
// CHECK-SAME:      %[[X:.*]]: tensor<1x1x4x4xf32>)
// CHECK-NEXT:    %[[W:.*]] = graph.constant {value = dense<{{\[\[\[\[}}1.000000e+00]]], {{\[\[\[}}1.500000e+00]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.constant {value = dense<[0.000000e+00, -2.000000e+00]> : tensor<2xf32>} : () -> tensor<2xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.conv %[[X]], %[[W]], %[[B]] {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<1x2x4x4xf32>
// LOC-LABEL:   func.func @conv_without_bias(
// LOC:           graph.conv {{.*}} loc("conv1")
func.func @conv_without_bias(%x: tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = graph.constant {value = dense<[[[[2.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %gamma = graph.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %beta = graph.constant {value = dense<[0.5, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %mean = graph.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %var = graph.constant {value = dense<[3.0, 15.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32> loc("conv1")
  %1 = graph.batch_norm %0, %gamma, %beta, %mean, %var {epsilon = 1.0 : f64} : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32> loc("bn1")
  func.return %1 : tensor<1x2x4x4xf32>
}

// With a conv bias b = [1, 1]: (b - mean) * s + beta = [0.5, -1.5].

// CHECK-LABEL: func.func @conv_with_bias(
// CHECK-SAME:      %[[X:.*]]: tensor<1x1x4x4xf32>)
// CHECK-NEXT:    %[[W:.*]] = graph.constant {value = dense<{{\[\[\[\[}}1.000000e+00]]], {{\[\[\[}}1.500000e+00]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.constant {value = dense<[5.000000e-01, -1.500000e+00]> : tensor<2xf32>} : () -> tensor<2xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.conv %[[X]], %[[W]], %[[B]] {{.*}} : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<1x2x4x4xf32>
func.func @conv_with_bias(%x: tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = graph.constant {value = dense<[[[[2.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %b = graph.constant {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %gamma = graph.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %beta = graph.constant {value = dense<[0.5, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %mean = graph.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %var = graph.constant {value = dense<[3.0, 15.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = graph.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  %1 = graph.batch_norm %0, %gamma, %beta, %mean, %var {epsilon = 1.0 : f64} : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %1 : tensor<1x2x4x4xf32>
}

// A linear layer's output channels are the weight's rows.

// CHECK-LABEL: func.func @linear(
// CHECK-SAME:      %[[X:.*]]: tensor<5x3xf32>)
// CHECK-NEXT:    %[[W:.*]] = graph.constant {value = dense<{{\[\[}}5.000000e-01, 1.000000e+00, 1.500000e+00], [2.000000e+00, 2.500000e+00, 3.000000e+00]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.constant {value = dense<[0.000000e+00, -2.000000e+00]> : tensor<2xf32>} : () -> tensor<2xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.linear %[[X]], %[[W]], %[[B]] : (tensor<5x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<5x2xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<5x2xf32>
func.func @linear(%x: tensor<5x3xf32>) -> tensor<5x2xf32> {
  %w = graph.constant {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %gamma = graph.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %beta = graph.constant {value = dense<[0.5, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %mean = graph.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %var = graph.constant {value = dense<[3.0, 15.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = graph.linear %x, %w : (tensor<5x3xf32>, tensor<2x3xf32>) -> tensor<5x2xf32>
  %1 = graph.batch_norm %0, %gamma, %beta, %mean, %var {epsilon = 1.0 : f64} : (tensor<5x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<5x2xf32>
  func.return %1 : tensor<5x2xf32>
}

// A transposed conv's output channels are the weight's second dim: with gamma = [1, 1],
// s = [0.5, 0.25] scales its columns.

// CHECK-LABEL: func.func @conv_transpose(
// CHECK-SAME:      %[[X:.*]]: tensor<1x2x3x3xf32>)
// CHECK-NEXT:    %[[W:.*]] = graph.constant {value = dense<{{\[\[\[\[}}5.000000e-01]], {{\[\[}}5.000000e-01]]], {{\[\[\[}}1.500000e+00]], {{\[\[}}1.000000e+00]]]]> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.constant {value = dense<0.000000e+00> : tensor<2xf32>} : () -> tensor<2xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.conv_transpose %[[X]], %[[W]], %[[B]] {{.*}} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<1x2x3x3xf32>
func.func @conv_transpose(%x: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
  %w = graph.constant {value = dense<[[[[1.0]], [[2.0]]], [[[3.0]], [[4.0]]]]> : tensor<2x2x1x1xf32>} : () -> tensor<2x2x1x1xf32>
  %gamma = graph.constant {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %zero = graph.constant {value = dense<0.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %var = graph.constant {value = dense<[3.0, 15.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = graph.conv_transpose %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x2x3x3xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x3x3xf32>
  %1 = graph.batch_norm %0, %gamma, %zero, %zero, %var {epsilon = 1.0 : f64} : (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
  func.return %1 : tensor<1x2x3x3xf32>
}

// Grouped: output channel g * (C_out / groups) + j is column j of group g's rows, so each row
// scales by its own group's factor.

// CHECK-LABEL: func.func @grouped_conv_transpose(
// CHECK-NEXT:    %[[W:.*]] = graph.constant {value = dense<{{\[\[\[\[}}1.000000e+00]]], {{\[\[\[}}7.500000e-01]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.constant {value = dense<0.000000e+00> : tensor<2xf32>} : () -> tensor<2xf32>
// CHECK-NEXT:    graph.conv_transpose %{{.*}}, %[[W]], %[[B]] {{.*}}groups = 2 : i64}
func.func @grouped_conv_transpose(%x: tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32> {
  %w = graph.constant {value = dense<[[[[2.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %gamma = graph.constant {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %zero = graph.constant {value = dense<0.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %var = graph.constant {value = dense<[3.0, 15.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = graph.conv_transpose %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, groups = 2 : i64} : (tensor<1x2x3x3xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x3x3xf32>
  %1 = graph.batch_norm %0, %gamma, %zero, %zero, %var {epsilon = 1.0 : f64} : (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf32>
  func.return %1 : tensor<1x2x3x3xf32>
}

// Not folded at all: a statistic that is not a constant.

// CHECK-LABEL: func.func @mean_not_constant(
// CHECK:         %[[Y:.*]] = graph.conv
// CHECK-NEXT:    %[[Z:.*]] = graph.batch_norm %[[Y]],
// CHECK-NEXT:    func.return %[[Z]]
func.func @mean_not_constant(%x: tensor<1x1x4x4xf32>, %mean: tensor<2xf32>) -> tensor<1x2x4x4xf32> {
  %w = graph.constant {value = dense<[[[[2.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %gamma = graph.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %beta = graph.constant {value = dense<[0.5, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %var = graph.constant {value = dense<[3.0, 15.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
  %1 = graph.batch_norm %0, %gamma, %beta, %mean, %var {epsilon = 1.0 : f64} : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %1 : tensor<1x2x4x4xf32>
}

// Not folded into the layer, a weight that is not a constant; the norm becomes x * s + t, with
// s = 1 / sqrt(1 + 1) = 0.7071 and t = 1 - 1 * s = 0.2929 per channel, shaped (C, 1, 1).

// CHECK-LABEL: func.func @weight_not_constant(
// CHECK:         %[[Y:.*]] = graph.conv
// CHECK-NEXT:    %[[S:.*]] = graph.constant {value = dense<0.707106769> : tensor<2x1x1xf32>}
// CHECK-NEXT:    %[[T:.*]] = graph.constant {value = dense<0.292893231> : tensor<2x1x1xf32>}
// CHECK-NEXT:    %[[M:.*]] = graph.mul %[[Y]], %[[S]] : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT:    %[[Z:.*]] = graph.add %[[M]], %[[T]] : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT:    func.return %[[Z]]
func.func @weight_not_constant(%x: tensor<1x1x4x4xf32>, %w: tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32> {
  %stat = graph.constant {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
  %1 = graph.batch_norm %0, %stat, %stat, %stat, %stat {epsilon = 1.0 : f64} : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %1 : tensor<1x2x4x4xf32>
}

// Not folded into the layer: the conv's own result is used too, so it must stay unnormalized.

// CHECK-LABEL: func.func @conv_used_twice(
// CHECK:         %[[Y:.*]] = graph.conv
// CHECK-NEXT:    %[[S:.*]] = graph.constant {value = dense<0.707106769> : tensor<2x1x1xf32>}
// CHECK-NEXT:    %[[T:.*]] = graph.constant {value = dense<0.292893231> : tensor<2x1x1xf32>}
// CHECK-NEXT:    %[[M:.*]] = graph.mul %[[Y]], %[[S]] : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT:    %[[Z:.*]] = graph.add %[[M]], %[[T]] : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32>
// CHECK-NEXT:    func.return %[[Y]], %[[Z]]
func.func @conv_used_twice(%x: tensor<1x1x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  %w = graph.constant {value = dense<[[[[2.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %stat = graph.constant {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
  %1 = graph.batch_norm %0, %stat, %stat, %stat, %stat {epsilon = 1.0 : f64} : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %0, %1 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}

// Not folded into the layer: on a rank-3 linear output the norm's channel axis 1 is not the
// feature axis. The affine form broadcasts (C, 1) against (N, C, L).

// CHECK-LABEL: func.func @linear_rank3(
// CHECK:         %[[Y:.*]] = graph.linear
// CHECK-NEXT:    %[[S:.*]] = graph.constant {value = dense<0.707106769> : tensor<2x1xf32>}
// CHECK-NEXT:    %[[T:.*]] = graph.constant {value = dense<0.292893231> : tensor<2x1xf32>}
// CHECK-NEXT:    %[[M:.*]] = graph.mul %[[Y]], %[[S]]
// CHECK-NEXT:    %[[Z:.*]] = graph.add %[[M]], %[[T]]
// CHECK-NEXT:    func.return %[[Z]]
func.func @linear_rank3(%x: tensor<5x2x3xf32>) -> tensor<5x2x2xf32> {
  %w = graph.constant {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %stat = graph.constant {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %0 = graph.linear %x, %w : (tensor<5x2x3xf32>, tensor<2x3xf32>) -> tensor<5x2x2xf32>
  %1 = graph.batch_norm %0, %stat, %stat, %stat, %stat {epsilon = 1.0 : f64} : (tensor<5x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<5x2x2xf32>
  func.return %1 : tensor<5x2x2xf32>
}

// A conv's explicit per-channel scale and shift (Caffe2's Inception-v2 after each norm) fold into it too:
// the weight [2, 3] times s = [2, 0.5] is [4, 1.5]; the bias 1 times s, plus t = [1, -1], is [3, -0.5].
// The vectors may come through a reshape, which goes with them.

// CHECK-LABEL: func.func @conv_scale_shift(
// CHECK-SAME:      %[[X:.*]]: tensor<1x1x4x4xf32>)
// CHECK-NEXT:    %[[W:.*]] = graph.constant {value = dense<{{\[\[\[\[}}4.000000e+00]]], {{\[\[\[}}1.500000e+00]]]]> : tensor<2x1x1x1xf32>}
// CHECK-NEXT:    %[[B:.*]] = graph.constant {value = dense<[3.000000e+00, -5.000000e-01]> : tensor<2xf32>}
// CHECK-NEXT:    %[[Y:.*]] = graph.conv %[[X]], %[[W]], %[[B]]
// CHECK-NEXT:    func.return %[[Y]] : tensor<1x2x4x4xf32>
func.func @conv_scale_shift(%x: tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = graph.constant {value = dense<[[[[2.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %b = graph.constant {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>
  %s = graph.constant {value = dense<[2.0, 0.5]> : tensor<2xf32>} : () -> tensor<2xf32>
  %t = graph.constant {value = dense<[[[1.0]], [[-1.0]]]> : tensor<2x1x1xf32>} : () -> tensor<2x1x1xf32>
  %0 = graph.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  %sv = graph.reshape %s : (tensor<2xf32>) -> tensor<2x1x1xf32>
  %1 = graph.mul %0, %sv : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %2 = graph.add %t, %1 : (tensor<2x1x1xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  func.return %2 : tensor<1x2x4x4xf32>
}

// A vector along another axis is no channel scale: the multiply stays.

// CHECK-LABEL: func.func @conv_scale_along_width(
// CHECK:         graph.mul
func.func @conv_scale_along_width(%x: tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = graph.constant {value = dense<2.0> : tensor<2x1x1x1xf32>} : () -> tensor<2x1x1x1xf32>
  %s = graph.constant {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
  %1 = graph.mul %0, %s : (tensor<1x2x4x4xf32>, tensor<4xf32>) -> tensor<1x2x4x4xf32>
  func.return %1 : tensor<1x2x4x4xf32>
}
