// RUN: gnomon-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One case per message of the graph ops' verifiers and shape rules, in the order of the modules
// that raise them (base, elementwise, embedding, linalg, nn, recurrent, reduce, tensor).

// ---- base: the shared textual form and the result check ----

func.func @too_few_operands(%a: tensor<4xf32>) {
  // CHECK: graph.add: expected at least 2 operands, got 1
  %0 = graph.add %a : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @too_many_operands(%a: tensor<4xf32>) {
  // CHECK: graph.relu: expected 1 operands, got 2
  %0 = graph.relu %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @missing_result(%a: tensor<4xf32>) {
  // CHECK: graph.relu: expected at least 1 results, got 0
  graph.relu %a : (tensor<4xf32>) -> ()
  func.return
}

// -----

func.func @result_count(%a: tensor<4x8xf32>) {
  // CHECK: graph.split: expected 2 results, got 3
  %0:3 = graph.split %a {axis = 1 : i64, sizes = array<i64: 2, 6>} : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x6xf32>, tensor<4x0xf32>)
  func.return
}

// -----

func.func @result_type(%a: tensor<2x3xf32>) {
  // CHECK: graph.relu: result type tensor<2x4xf32> does not match inferred type tensor<2x3xf32>
  %0 = graph.relu %a : (tensor<2x3xf32>) -> tensor<2x4xf32>
  func.return
}

// -----

func.func @result_type_of_one_of_several(%x: tensor<8x16x4x4xf32>, %c: tensor<16xf32>) {
  // CHECK: graph.batch_norm_train: result #1 type tensor<8xf32> does not match inferred type tensor<16xf32>
  %y, %mean, %var = graph.batch_norm_train %x, %c, %c {epsilon = 1.0e-05 : f64, momentum = 0.1 : f64} : (tensor<8x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<8x16x4x4xf32>, tensor<8xf32>, tensor<16xf32>)
  func.return
}

// -----

// CHECK: graph.constant value must be a ranked tensor, got vector<3xi64>
%0 = graph.constant {value = dense<[1, 2, 3]> : vector<3xi64>} : () -> tensor<3xi64>

// -----

func.func @broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // CHECK: graph.add: shapes [2, 3], [4] do not broadcast
  %0 = graph.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  func.return
}

// -----

func.func @axis_out_of_range(%a: tensor<2x3xf32>) {
  // CHECK: graph.softmax: axis 2 is out of range for rank 2
  %0 = graph.softmax %a {axis = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return
}

// -----

// ---- elementwise ----

func.func @gelu_approximation(%a: tensor<4xf32>) {
  // CHECK: graph.gelu: approximate must be one of none, tanh, got 'erf'
  %0 = graph.gelu %a {approximate = "erf"} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @clip_bounds(%a: tensor<4xf32>) {
  // CHECK: graph.clip: min 6.0 is greater than max 0.0
  %0 = graph.clip %a {min = 6.0 : f64, max = 0.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @binary_element_types(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // CHECK: graph.mul: lhs element type f32 differs from rhs element type f16
  %0 = graph.mul %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  func.return
}

// -----

func.func @where_condition(%c: tensor<4xi8>, %a: tensor<4xf32>) {
  // CHECK: graph.where: condition must have element type i1, got i8
  %0 = graph.where %c, %a, %a : (tensor<4xi8>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @where_branches(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xi64>) {
  // CHECK: graph.where: on_true element type f32 differs from on_false i64
  %0 = graph.where %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xi64>) -> tensor<4xf32>
  func.return
}

// -----

func.func @bitwise_on_floats(%a: tensor<4xf32>) {
  // CHECK: graph.shift_left: operands must be integers, got element type f32
  %0 = graph.shift_left %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @bitcast_size(%a: tensor<4xf32>) {
  // CHECK: graph.bitcast: element types f32 and i64 differ in size
  %0 = graph.bitcast %a : (tensor<4xf32>) -> tensor<4xi64>
  func.return
}

// -----

func.func @bitwise_not_on_bools(%b: tensor<4xi1>) {
  // CHECK: graph.bitwise_not: input must be integers, got element type i1
  %0 = graph.bitwise_not %b : (tensor<4xi1>) -> tensor<4xi1>
  func.return
}

// -----

// ---- embedding ----

func.func @embedding_indices(%t: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // CHECK: graph.embedding: indices must be i32 or i64, got f32
  %0 = graph.embedding %t, %i : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  func.return
}

// -----

func.func @embedding_table(%t: tensor<10xf32>, %i: tensor<3xi64>) {
  // CHECK: graph.embedding: table must be 2-D (rows, dim), got shape [10]
  %0 = graph.embedding %t, %i : (tensor<10xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  func.return
}

// -----

func.func @grid_sample_mode(%x: tensor<1x2x4x4xf32>, %g: tensor<1x3x3x2xf32>) {
  // CHECK: graph.grid_sample: mode must be one of nearest, linear, cubic, got 'bilinear'
  %0 = graph.grid_sample %x, %g {mode = "bilinear", padding_mode = "zeros", align_corners = false} : (tensor<1x2x4x4xf32>, tensor<1x3x3x2xf32>) -> tensor<1x2x3x3xf32>
  func.return
}

// -----

func.func @grid_sample_coordinates(%x: tensor<1x2x4x4xf32>, %g: tensor<1x3x3x3xf32>) {
  // CHECK: graph.grid_sample: grid [1, 3, 3, 3] does not hold 2 coordinates for each point of input [1, 2, 4, 4]
  %0 = graph.grid_sample %x, %g {mode = "linear", padding_mode = "zeros", align_corners = false} : (tensor<1x2x4x4xf32>, tensor<1x3x3x3xf32>) -> tensor<1x2x3x3xf32>
  func.return
}

// -----

func.func @embedding_bag_mode(%t: tensor<10x4xf32>, %i: tensor<6xi64>, %o: tensor<2xi64>) {
  // CHECK: graph.embedding_bag: mode must be one of sum, mean, max, got 'min'
  %0 = graph.embedding_bag %t, %i, %o {mode = "min", include_last_offset = false} : (tensor<10x4xf32>, tensor<6xi64>, tensor<2xi64>) -> tensor<2x4xf32>
  func.return
}

// -----

func.func @embedding_bag_ranks(%t: tensor<10x4xf32>, %i: tensor<2x3xi64>, %o: tensor<2xi64>) {
  // CHECK: graph.embedding_bag: indices [2, 3] and offsets [2] must be 1-D
  %0 = graph.embedding_bag %t, %i, %o {mode = "sum", include_last_offset = false} : (tensor<10x4xf32>, tensor<2x3xi64>, tensor<2xi64>) -> tensor<2x4xf32>
  func.return
}

// -----

func.func @embedding_bag_weights_mode(%t: tensor<10x4xf32>, %i: tensor<6xi64>, %o: tensor<2xi64>, %w: tensor<6xf32>) {
  // CHECK: graph.embedding_bag: per_sample_weights need mode sum
  %0 = graph.embedding_bag %t, %i, %o, %w {mode = "mean", include_last_offset = false} : (tensor<10x4xf32>, tensor<6xi64>, tensor<2xi64>, tensor<6xf32>) -> tensor<2x4xf32>
  func.return
}

// -----

func.func @embedding_bag_weights_shape(%t: tensor<10x4xf32>, %i: tensor<6xi64>, %o: tensor<2xi64>, %w: tensor<5xf32>) {
  // CHECK: graph.embedding_bag: per_sample_weights [5] do not match indices [6]
  %0 = graph.embedding_bag %t, %i, %o, %w {mode = "sum", include_last_offset = false} : (tensor<10x4xf32>, tensor<6xi64>, tensor<2xi64>, tensor<5xf32>) -> tensor<2x4xf32>
  func.return
}

// -----

// ---- linalg ----

func.func @matmul_scalar(%a: tensor<f32>, %b: tensor<4xf32>) {
  // CHECK: graph.matmul: operands must have rank >= 1
  %0 = graph.matmul %a, %b : (tensor<f32>, tensor<4xf32>) -> tensor<f32>
  func.return
}

// -----

func.func @matmul_element_types(%a: tensor<2x4xf32>, %b: tensor<4x3xbf16>) {
  // CHECK: graph.matmul: lhs element type f32 differs from rhs bf16
  %0 = graph.matmul %a, %b : (tensor<2x4xf32>, tensor<4x3xbf16>) -> tensor<2x3xf32>
  func.return
}

// -----

func.func @matmul_contraction(%a: tensor<2x4xf32>, %b: tensor<5x3xf32>) {
  // CHECK: graph.matmul: contracting dims differ: lhs [2, 4] and rhs [5, 3]
  %0 = graph.matmul %a, %b : (tensor<2x4xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
  func.return
}

// -----

func.func @det_not_square(%x: tensor<2x3x4xf32>) {
  // CHECK: graph.det: input [2, 3, 4] is not a batch of square matrices
  %0 = graph.det %x : (tensor<2x3x4xf32>) -> tensor<2xf32>
  func.return
}

// -----

func.func @det_integers(%x: tensor<3x3xi64>) {
  // CHECK: graph.det: input must be floats, got element type i64
  %0 = graph.det %x : (tensor<3x3xi64>) -> tensor<i64>
  func.return
}

// -----

func.func @linear_weight_rank(%x: tensor<2x4xf32>, %w: tensor<4xf32>) {
  // CHECK: graph.linear: needs input rank >= 1 and a 2-D weight, got [2, 4] and [4]
  %0 = graph.linear %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2xf32>
  func.return
}

// -----

func.func @linear_features(%x: tensor<2x4xf32>, %w: tensor<3x5xf32>) {
  // CHECK: graph.linear: input features 4 differ from weight in_features 5
  %0 = graph.linear %x, %w : (tensor<2x4xf32>, tensor<3x5xf32>) -> tensor<2x3xf32>
  func.return
}

// -----

func.func @linear_bias(%x: tensor<2x4xf32>, %w: tensor<3x4xf32>, %b: tensor<4xf32>) {
  // CHECK: graph.linear: bias shape [4] is not [3]
  %0 = graph.linear %x, %w, %b : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  func.return
}

// -----

// ---- nn ----

func.func @window_entries(%x: tensor<1x8x5x5xf32>) {
  // CHECK: graph.max_pool: strides has 1 entries, expected 2
  %0 = graph.max_pool %x {kernel = array<i64: 2, 2>, strides = array<i64: 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x8x5x5xf32>) -> tensor<1x8x2x2xf32>
  func.return
}

// -----

func.func @window_too_large(%x: tensor<1x8x2x2xf32>) {
  // CHECK: graph.avg_pool: spatial dim 0 of input [1, 8, 2, 2] is too small for the window
  %0 = graph.avg_pool %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = false} : (tensor<1x8x2x2xf32>) -> tensor<1x8x1x1xf32>
  func.return
}

// -----

func.func @activation_rank(%x: tensor<8x5xf32>) {
  // CHECK: graph.global_avg_pool: input must have rank >= 3 (N, C, spatial...), got shape [8, 5]
  %0 = graph.global_avg_pool %x : (tensor<8x5xf32>) -> tensor<8x5xf32>
  func.return
}

// -----

func.func @conv_weight_rank(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3xf32>) {
  // CHECK: graph.conv: weight rank 3 differs from input rank 4
  %0 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}

// -----

func.func @conv_groups(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) {
  // CHECK: graph.conv: output channels 6 are not divisible by groups 4
  %0 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 4 : i64} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x6x6xf32>
  func.return
}

// -----

func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // CHECK: graph.conv: input has 3 channels but weight expects 2 x 1 groups
  %0 = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}

// -----

func.func @conv_bias(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  // CHECK: graph.conv: bias shape [3] is not [4]
  %0 = graph.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}

// -----

func.func @conv_transpose_weight_rank(%x: tensor<1x8x4x4xf32>, %w: tensor<8x4x3xf32>) {
  // CHECK: graph.conv_transpose: weight rank 3 differs from input rank 4
  %0 = graph.conv_transpose %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x8x4x4xf32>, tensor<8x4x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}

// -----

func.func @conv_transpose_channels(%x: tensor<1x8x4x4xf32>, %w: tensor<6x4x3x3xf32>) {
  // CHECK: graph.conv_transpose: input has 8 channels but weight expects 6
  %0 = graph.conv_transpose %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x8x4x4xf32>, tensor<6x4x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}

// -----

func.func @conv_transpose_groups(%x: tensor<1x8x4x4xf32>, %w: tensor<8x4x3x3xf32>) {
  // CHECK: graph.conv_transpose: input channels 8 are not divisible by groups 3
  %0 = graph.conv_transpose %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, groups = 3 : i64} : (tensor<1x8x4x4xf32>, tensor<8x4x3x3xf32>) -> tensor<1x12x6x6xf32>
  func.return
}

// -----

func.func @conv_transpose_bias(%x: tensor<1x8x4x4xf32>, %w: tensor<8x4x3x3xf32>, %b: tensor<8xf32>) {
  // CHECK: graph.conv_transpose: bias shape [8] is not [4]
  %0 = graph.conv_transpose %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x8x4x4xf32>, tensor<8x4x3x3xf32>, tensor<8xf32>) -> tensor<1x4x6x6xf32>
  func.return
}

// -----

func.func @conv_transpose_too_small(%x: tensor<1x8x1x1xf32>, %w: tensor<8x4x1x1xf32>) {
  // CHECK: graph.conv_transpose: output spatial dims [-1, 1] of input [1, 8, 1, 1] are too small
  %0 = graph.conv_transpose %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 0, 1, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x8x1x1xf32>, tensor<8x4x1x1xf32>) -> tensor<1x4x1x1xf32>
  func.return
}

// -----

func.func @channel_vector(%x: tensor<1x16x4x4xf32>, %c: tensor<16xf32>, %bad: tensor<8xf32>) {
  // CHECK: graph.batch_norm: mean shape [8] does not match 16 channels of input
  %0 = graph.batch_norm %x, %c, %c, %bad, %c {epsilon = 1.0e-05 : f64} : (tensor<1x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>, tensor<8xf32>, tensor<16xf32>) -> tensor<1x16x4x4xf32>
  func.return
}

// -----

func.func @batch_norm_rank(%x: tensor<16xf32>, %c: tensor<16xf32>) {
  // CHECK: graph.batch_norm: input must have rank >= 2, got shape [16]
  %0 = graph.batch_norm %x, %c, %c, %c, %c {epsilon = 1.0e-05 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  func.return
}

// -----

func.func @batch_norm_train_rank(%x: tensor<16xf32>, %c: tensor<16xf32>) {
  // CHECK: graph.batch_norm_train: input must have rank >= 2, got shape [16]
  %y, %m, %v = graph.batch_norm_train %x, %c, %c {epsilon = 1.0e-05 : f64, momentum = 0.1 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  func.return
}

// -----

func.func @affine_count(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>) {
  // CHECK: graph.layer_norm: takes no affine operands or a scale and a bias, got 1
  %0 = graph.layer_norm %x, %g {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  func.return
}

// -----

func.func @affine_shape(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>) {
  // CHECK: graph.layer_norm: scale shape [64] is not [16, 64]
  %0 = graph.layer_norm %x, %g, %g {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  func.return
}

// -----

func.func @instance_norm_rank(%x: tensor<2x16xf32>) {
  // CHECK: graph.instance_norm: input must have rank >= 3, got shape [2, 16]
  %0 = graph.instance_norm %x {epsilon = 1.0e-05 : f64} : (tensor<2x16xf32>) -> tensor<2x16xf32>
  func.return
}

// -----

func.func @group_norm_groups(%x: tensor<1x6x4x4xf32>) {
  // CHECK: graph.group_norm: channels of input [1, 6, 4, 4] are not divisible by 4 groups
  %0 = graph.group_norm %x {num_groups = 4 : i64, epsilon = 1.0e-05 : f64} : (tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  func.return
}

// -----

func.func @attention_ranks(%q: tensor<2x16x64xf32>, %k: tensor<2x4x16x64xf32>) {
  // CHECK: graph.attention: query [2, 16, 64], key [2, 4, 16, 64] and value [2, 4, 16, 64] need one rank >= 2
  %0 = graph.attention %q, %k, %k {scale = 0.125 : f64, is_causal = false} : (tensor<2x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>) -> tensor<2x16x64xf32>
  func.return
}

// -----

func.func @attention_embedding(%q: tensor<2x16x64xf32>, %k: tensor<2x16x32xf32>) {
  // CHECK: graph.attention: query embedding 64 differs from key embedding 32
  %0 = graph.attention %q, %k, %k {scale = 0.125 : f64, is_causal = false} : (tensor<2x16x64xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  func.return
}

// -----

func.func @attention_length(%q: tensor<2x16x64xf32>, %v: tensor<2x8x64xf32>) {
  // CHECK: graph.attention: key length 16 differs from value length 8
  %0 = graph.attention %q, %q, %v {scale = 0.125 : f64, is_causal = false} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x8x64xf32>) -> tensor<2x16x64xf32>
  func.return
}

// -----

func.func @attention_train_rank(%q: tensor<2x16x64xf32>) {
  // CHECK: graph.attention_train: query [2, 16, 64], key [2, 16, 64] and value [2, 16, 64] must be 4-D (batch, heads, length, head size)
  %0:2 = graph.attention_train %q, %q, %q {scale = 0.125 : f64, is_causal = false} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16xf32>)
  func.return
}

// -----

func.func @attention_train_head_size(%q: tensor<2x4x16x64xf32>, %v: tensor<2x4x16x32xf32>) {
  // CHECK: graph.attention_train: query [2, 4, 16, 64], key [2, 4, 16, 64] and value [2, 4, 16, 32] need one head size
  %0:2 = graph.attention_train %q, %q, %v {scale = 0.125 : f64, is_causal = false} : (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x32xf32>) -> (tensor<2x4x16x32xf32>, tensor<2x4x16xf32>)
  func.return
}

// -----

func.func @attention_train_mask(%q: tensor<2x4x16x64xf32>, %mask: tensor<3x16x16xf32>) {
  // CHECK: graph.attention_train: mask [3, 16, 16] does not broadcast to [2, 4, 16, 16]
  %0:2 = graph.attention_train %q, %q, %q, %mask {scale = 0.125 : f64, is_causal = false} : (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<3x16x16xf32>) -> (tensor<2x4x16x64xf32>, tensor<2x4x16xf32>)
  func.return
}

// -----

func.func @attention_grad_statistics(%q: tensor<2x4x16x64xf32>, %lse: tensor<2x4x8xf32>) {
  // CHECK: graph.attention_grad: logsumexp tensor<2x4x8xf32> is not tensor<2x4x16xf32>
  %0:3 = graph.attention_grad %q, %q, %q, %q, %q, %lse {scale = 0.125 : f64, is_causal = false} : (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>)
  func.return
}

// -----

// ---- recurrent ----

func.func @recurrent_gate_rows(%x: tensor<5x2x16xf32>, %w: tensor<96x16xf32>, %r: tensor<96x32xf32>, %b: tensor<96xf32>, %h: tensor<2x32xf32>) {
  // CHECK: graph.lstm: weight_ih [96, 16] and weight_hh [96, 32] need 4 x hidden 32 rows
  %0:3 = graph.lstm %x, %w, %r, %b, %b, %h, %h {reverse = false, input_forget = false} : (tensor<5x2x16xf32>, tensor<96x16xf32>, tensor<96x32xf32>, tensor<96xf32>, tensor<96xf32>, tensor<2x32xf32>, tensor<2x32xf32>) -> (tensor<5x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>)
  func.return
}

// -----

func.func @recurrent_input_size(%x: tensor<5x2x8xf32>, %w: tensor<96x16xf32>, %r: tensor<96x32xf32>, %b: tensor<96xf32>, %h: tensor<2x32xf32>) {
  // CHECK: graph.gru: weight_ih [96, 16] does not take input size 8
  %0:2 = graph.gru %x, %w, %r, %b, %b, %h {reverse = false, linear_before_reset = true} : (tensor<5x2x8xf32>, tensor<96x16xf32>, tensor<96x32xf32>, tensor<96xf32>, tensor<96xf32>, tensor<2x32xf32>) -> (tensor<5x2x32xf32>, tensor<2x32xf32>)
  func.return
}

// -----

func.func @recurrent_state(%x: tensor<5x2x16xf32>, %w: tensor<32x16xf32>, %r: tensor<32x32xf32>, %b: tensor<32xf32>, %h: tensor<3x32xf32>) {
  // CHECK: graph.rnn: h0 [3, 32] is not (batch, hidden) [2, 32]
  %0:2 = graph.rnn %x, %w, %r, %b, %b, %h {reverse = false, nonlinearity = "tanh"} : (tensor<5x2x16xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<3x32xf32>) -> (tensor<5x2x32xf32>, tensor<2x32xf32>)
  func.return
}

// -----

func.func @recurrent_nonlinearity(%x: tensor<5x2x16xf32>, %w: tensor<32x16xf32>, %r: tensor<32x32xf32>, %b: tensor<32xf32>, %h: tensor<2x32xf32>) {
  // CHECK: graph.rnn: nonlinearity must be one of tanh, relu, got 'sigmoid'
  %0:2 = graph.rnn %x, %w, %r, %b, %b, %h {reverse = false, nonlinearity = "sigmoid"} : (tensor<5x2x16xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<2x32xf32>) -> (tensor<5x2x32xf32>, tensor<2x32xf32>)
  func.return
}

// -----

func.func @recurrent_peepholes(%x: tensor<5x2x16xf32>, %w: tensor<128x16xf32>, %r: tensor<128x32xf32>, %b: tensor<128xf32>, %h: tensor<2x32xf32>) {
  // CHECK: graph.lstm: peepholes [128] are not (3 x hidden 32)
  %0:3 = graph.lstm %x, %w, %r, %b, %b, %h, %h, %b {reverse = false, input_forget = false} : (tensor<5x2x16xf32>, tensor<128x16xf32>, tensor<128x32xf32>, tensor<128xf32>, tensor<128xf32>, tensor<2x32xf32>, tensor<2x32xf32>, tensor<128xf32>) -> (tensor<5x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>)
  func.return
}

// -----

func.func @recurrent_clip(%x: tensor<5x2x16xf32>, %w: tensor<32x16xf32>, %r: tensor<32x32xf32>, %b: tensor<32xf32>, %h: tensor<2x32xf32>) {
  // CHECK: graph.rnn: clip 0.0 is not positive
  %0:2 = graph.rnn %x, %w, %r, %b, %b, %h {reverse = false, clip = 0.0 : f64, nonlinearity = "tanh"} : (tensor<5x2x16xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<2x32xf32>) -> (tensor<5x2x32xf32>, tensor<2x32xf32>)
  func.return
}

// -----

// ---- reduce ----

func.func @reduce_axes(%x: tensor<2x8xf32>) {
  // CHECK: graph.reduce_sum: axes [1, -1] repeat a dim
  %0 = graph.reduce_sum %x {axes = array<i64: 1, -1>, keepdims = false} : (tensor<2x8xf32>) -> tensor<2xf32>
  func.return
}

// -----

func.func @scan_axis(%x: tensor<2x8xf32>) {
  // CHECK: graph.cumsum: axis 2 is out of range for rank 2
  %0 = graph.cumsum %x {axis = 2 : i64, exclusive = false, reverse = false} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return
}

// -----

// ---- tensor ----

func.func @reshape_element_type(%x: tensor<2x8xf32>) {
  // CHECK: graph.reshape: element type changes from f32 to i32
  %0 = graph.reshape %x : (tensor<2x8xf32>) -> tensor<16xi32>
  func.return
}

// -----

func.func @reshape_count(%x: tensor<2x8xf32>) {
  // CHECK: graph.reshape: input [2, 8] has 16 elements, result [3, 5] has 15
  %0 = graph.reshape %x : (tensor<2x8xf32>) -> tensor<3x5xf32>
  func.return
}

// -----

func.func @reshape_inferred_dim(%x: tensor<2x7xf32>) {
  // CHECK: graph.reshape: input [2, 7] has 14 elements, not a multiple of the 4 of result [4, ?]
  %0 = graph.reshape %x : (tensor<2x7xf32>) -> tensor<4x?xf32>
  func.return
}

// -----

func.func @reshape_dynamic(%x: tensor<?x8xf32>) {
  // CHECK: graph.reshape: result [?, ?] has more than one dynamic dim
  %0 = graph.reshape %x : (tensor<?x8xf32>) -> tensor<?x?xf32>
  func.return
}

// -----

func.func @transpose_permutation(%x: tensor<2x3x4xf32>) {
  // CHECK: graph.transpose: permutation [0, 2, 2] is not a permutation of 3 dims
  %0 = graph.transpose %x {permutation = array<i64: 0, 2, 2>} : (tensor<2x3x4xf32>) -> tensor<2x4x4xf32>
  func.return
}

// -----

// CHECK: graph.concat: needs at least one input
%0 = graph.concat {axis = 0 : i64} : () -> tensor<4xf32>

// -----

func.func @concat_shapes(%a: tensor<4x8xf32>, %b: tensor<3x2xf32>) {
  // CHECK: graph.concat: input #1 shape [3, 2] does not match [4, 8] off axis 1
  %0 = graph.concat %a, %b {axis = 1 : i64} : (tensor<4x8xf32>, tensor<3x2xf32>) -> tensor<4x10xf32>
  func.return
}

// -----

func.func @split_sizes(%x: tensor<4x8xf32>) {
  // CHECK: graph.split: sizes [2, 5] do not add up to dim 1 of input [4, 8]
  %0:2 = graph.split %x {axis = 1 : i64, sizes = array<i64: 2, 5>} : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x5xf32>)
  func.return
}

// -----

func.func @slice_entries(%x: tensor<4x8xf32>) {
  // CHECK: graph.slice: starts, ends and steps need 2 entries each (the input rank)
  %0 = graph.slice %x {starts = array<i64: 0>, ends = array<i64: 4>, steps = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return
}

// -----

func.func @slice_step(%x: tensor<4x8xf32>) {
  // CHECK: graph.slice: steps [1, 0] contain 0
  %0 = graph.slice %x {starts = array<i64: 0, 0>, ends = array<i64: 4, 8>, steps = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return
}

// -----

func.func @slice_scatter_update(%x: tensor<4x8xf32>, %u: tensor<4x3xf32>) {
  // CHECK: graph.slice_scatter: update [4, 3] does not match the slice [4, 4]
  %0 = graph.slice_scatter %x, %u {starts = array<i64: 0, 0>, ends = array<i64: 4, 8>, steps = array<i64: 1, 2>} : (tensor<4x8xf32>, tensor<4x3xf32>) -> tensor<4x8xf32>
  func.return
}

// -----

func.func @slice_scatter_steps(%x: tensor<4x8xf32>, %u: tensor<4x8xf32>) {
  // CHECK: graph.slice_scatter: steps [1, -1] must be positive
  %0 = graph.slice_scatter %x, %u {starts = array<i64: 0, 7>, ends = array<i64: 4, -1>, steps = array<i64: 1, -1>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return
}

// -----

func.func @gather_indices(%x: tensor<10x4xf32>, %i: tensor<3xi16>) {
  // CHECK: graph.gather: indices must be i32 or i64, got i16
  %0 = graph.gather %x, %i {axis = 0 : i64} : (tensor<10x4xf32>, tensor<3xi16>) -> tensor<3x4xf32>
  func.return
}

// -----

func.func @gather_elements_rank(%x: tensor<2x5xf32>, %i: tensor<3xi64>) {
  // CHECK: graph.gather_elements: indices rank 1 differs from input rank 2
  %0 = graph.gather_elements %x, %i {axis = 1 : i64} : (tensor<2x5xf32>, tensor<3xi64>) -> tensor<3xf32>
  func.return
}

// -----

func.func @scatter_elements_reduction(%x: tensor<2x5xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3xf32>) {
  // CHECK: graph.scatter_elements: reduction must be one of none, add, mul, max, min, got 'mean'
  %0 = graph.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = "mean"} : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x5xf32>
  func.return
}

// -----

func.func @scatter_elements_updates(%x: tensor<2x5xf32>, %i: tensor<2x3xi64>, %u: tensor<2x2xf32>) {
  // CHECK: graph.scatter_elements: updates [2, 2] differ from indices [2, 3]
  %0 = graph.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = "none"} : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x2xf32>) -> tensor<2x5xf32>
  func.return
}

// -----

func.func @scatter_elements_off_axis(%x: tensor<2x5xf32>, %i: tensor<3x3xi64>, %u: tensor<3x3xf32>) {
  // CHECK: graph.scatter_elements: indices [3, 3] exceed input [2, 5] off axis 1
  %0 = graph.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = "add"} : (tensor<2x5xf32>, tensor<3x3xi64>, tensor<3x3xf32>) -> tensor<2x5xf32>
  func.return
}

// -----

func.func @pad_mode(%x: tensor<4x4xf32>) {
  // CHECK: graph.pad: mode must be one of constant, reflect, replicate, wrap, got 'circular'
  %0 = graph.pad %x {pads = array<i64: 1, 1, 1, 1>, mode = "circular", value = 0.0 : f64} : (tensor<4x4xf32>) -> tensor<6x6xf32>
  func.return
}

// -----

func.func @pad_entries(%x: tensor<4x4xf32>) {
  // CHECK: graph.pad: pads has 2 entries, expected 4 for rank 2
  %0 = graph.pad %x {pads = array<i64: 1, 1>, mode = "constant", value = 0.0 : f64} : (tensor<4x4xf32>) -> tensor<6x6xf32>
  func.return
}

// -----

func.func @pad_negative(%x: tensor<4x4xf32>) {
  // CHECK: graph.pad: pads [0, -3, 0, -2] remove more than input [4, 4] has
  %0 = graph.pad %x {pads = array<i64: 0, -3, 0, -2>, mode = "constant", value = 0.0 : f64} : (tensor<4x4xf32>) -> tensor<4x1xf32>
  func.return
}

// -----

func.func @expand_target(%x: tensor<3x4xf32>) {
  // CHECK: graph.expand: input [3, 4] does not broadcast to [4]
  %0 = graph.expand %x : (tensor<3x4xf32>) -> tensor<4xf32>
  func.return
}

// -----

func.func @tile_repeats(%x: tensor<3x4xf32>) {
  // CHECK: graph.tile: repeats has 1 entries, expected 2
  %0 = graph.tile %x {repeats = array<i64: 2>} : (tensor<3x4xf32>) -> tensor<6x4xf32>
  func.return
}

// -----

func.func @dims_without_names(%x: tensor<?x4xf32, #graph.dims<["", ""]>>) {
  // CHECK: #graph.dims names no dim: drop the encoding instead
  func.return
}

// -----

func.func @lstm_train_workspace(%x: tensor<5x2x4xf32>, %w: tensor<12x4xf32>, %r: tensor<12x3xf32>, %b: tensor<12xf32>, %h: tensor<2x3xf32>) {
  // CHECK: graph.lstm_train: workspace tensor<64xf32> is not a static 1-D tensor of bytes
  %0:4 = graph.lstm_train %x, %w, %r, %b, %b, %h, %h {reverse = false} : (tensor<5x2x4xf32>, tensor<12x4xf32>, tensor<12x3xf32>, tensor<12xf32>, tensor<12xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<5x2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<64xf32>)
  func.return
}

// -----

func.func @lstm_grad_output_gradient(%x: tensor<5x2x4xf32>, %w: tensor<12x4xf32>, %r: tensor<12x3xf32>, %b: tensor<12xf32>, %h: tensor<2x3xf32>, %y: tensor<5x2x3xf32>, %dy: tensor<4x2x3xf32>, %ws: tensor<64xui8>) {
  // CHECK: graph.lstm_grad: grad_y [4, 2, 3] is not [5, 2, 3]
  %0:6 = graph.lstm_grad %x, %w, %r, %b, %b, %h, %h, %y, %h, %h, %dy, %h, %h, %ws {reverse = false} : (tensor<5x2x4xf32>, tensor<12x4xf32>, tensor<12x3xf32>, tensor<12xf32>, tensor<12xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<5x2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<4x2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<64xui8>) -> (tensor<5x2x4xf32>, tensor<12x4xf32>, tensor<12x3xf32>, tensor<12xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
  func.return
}

// -----

func.func @sparse_adam_step_size(%t: tensor<10x4xf32>, %dp: tensor<2x4xf32>, %ids: tensor<3xi64>, %offsets: tensor<2xi64>, %lr: tensor<1xf32>) {
  // CHECK: graph.embedding_bag_adam_update: step_size tensor<1xf32> is not a 0-d tensor
  %0:3 = graph.embedding_bag_adam_update %t, %t, %t, %dp, %ids, %offsets, %lr {mode = "sum", beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64} : (tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>, tensor<2x4xf32>, tensor<3xi64>, tensor<2xi64>, tensor<1xf32>) -> (tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>)
  func.return
}

// -----

// ---- control_flow ----

func.func @if_predicate_type(%a: tensor<4xf32>, %p: tensor<f32>) {
  // CHECK: graph.if predicate must be a tensor of i1, got tensor<f32>
  %0 = graph.if %p : tensor<f32> -> (tensor<4xf32>) {
    graph.yield %a : tensor<4xf32>
  } else {
    graph.yield %a : tensor<4xf32>
  }
  func.return
}

// -----

func.func @if_predicate_size(%a: tensor<4xf32>, %p: tensor<2xi1>) {
  // CHECK: graph.if predicate must hold one element, got shape [2]
  %0 = graph.if %p : tensor<2xi1> -> (tensor<4xf32>) {
    graph.yield %a : tensor<4xf32>
  } else {
    graph.yield %a : tensor<4xf32>
  }
  func.return
}

// -----

func.func @if_yield_count(%a: tensor<4xf32>, %p: tensor<i1>) {
  // CHECK: graph.if: the then branch yields 1 values, the else branch 2
  %0 = graph.if %p : tensor<i1> -> (tensor<4xf32>) {
    graph.yield %a : tensor<4xf32>
  } else {
    graph.yield %a, %a : tensor<4xf32>, tensor<4xf32>
  }
  func.return
}

// -----

func.func @if_branch_types(%a: tensor<4xf32>, %b: tensor<4xi64>, %p: tensor<i1>) {
  // CHECK: graph.if result #0: tensor<4xf32> and tensor<4xi64> differ in element type or rank
  %0 = graph.if %p : tensor<i1> -> (tensor<4xf32>) {
    graph.yield %a : tensor<4xf32>
  } else {
    graph.yield %b : tensor<4xi64>
  }
  func.return
}

// -----

func.func @if_result_type(%a: tensor<4xf32>, %b: tensor<5xf32>, %p: tensor<i1>) {
  // CHECK: graph.if: result #0 type tensor<4xf32> does not hold tensor<5xf32>
  %0 = graph.if %p : tensor<i1> -> (tensor<4xf32>) {
    graph.yield %a : tensor<4xf32>
  } else {
    graph.yield %b : tensor<5xf32>
  }
  func.return
}

// -----

func.func @while_cond_yields(%a: tensor<4xf32>, %p: tensor<i1>) {
  // CHECK: graph.while: the cond region must yield one predicate, it yields 2
  %0 = graph.while (%a) : (tensor<4xf32>) -> (tensor<4xf32>) cond {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %p, %p : tensor<i1>, tensor<i1>
  } do {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %x : tensor<4xf32>
  }
  func.return
}

// -----

func.func @while_body_yields(%a: tensor<4xf32>, %p: tensor<i1>) {
  // CHECK: graph.while: the do region yields 2 values, 1 are carried
  %0 = graph.while (%a) : (tensor<4xf32>) -> (tensor<4xf32>) cond {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %p : tensor<i1>
  } do {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %x, %x : tensor<4xf32>, tensor<4xf32>
  }
  func.return
}

// -----

func.func @while_region_args(%a: tensor<4xf32>, %p: tensor<i1>) {
  // CHECK: graph.while: the do region's argument #0 is tensor<5xf32>, the carried value's type is tensor<4xf32>
  %0 = graph.while (%a) : (tensor<4xf32>) -> (tensor<4xf32>) cond {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %p : tensor<i1>
  } do {
  ^bb0(%x: tensor<5xf32>):
    graph.yield %a : tensor<4xf32>
  }
  func.return
}

// -----

func.func @while_changes_shape(%a: tensor<4xf32>, %b: tensor<5xf32>, %p: tensor<i1>) {
  // CHECK: graph.while: result #0 type tensor<4xf32> does not hold tensor<5xf32>
  %0 = graph.while (%a) : (tensor<4xf32>) -> (tensor<4xf32>) cond {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %p : tensor<i1>
  } do {
  ^bb0(%x: tensor<4xf32>):
    graph.yield %b : tensor<5xf32>
  }
  func.return
}

// -----

func.func @yield_outside(%a: tensor<4xf32>) {
  // CHECK: 'graph.yield' expects parent op to be one of 'graph.if', 'graph.while'
  graph.yield %a : tensor<4xf32>
}

// -----

func.func @iota_of_floats(%a: tensor<2x8xf32>) {
  // CHECK: graph.iota: result must be integers, got f32
  %0 = graph.iota %a {axis = 1 : i64} : (tensor<2x8xf32>) -> tensor<8xf32>
  func.return
}

// -----

func.func @slice_of_part_of_a_dynamic_dim(%a: tensor<2x?xf32>) {
  // CHECK: graph.slice: dim 1 is dynamic (?): only all of it can be taken (start 0, a negative end, step 1), not 1:-9223372036854775808:1
  %0 = graph.slice %a {starts = array<i64: 0, 1>, ends = array<i64: 2, -9223372036854775808>, steps = array<i64: 1, 1>} : (tensor<2x?xf32>) -> tensor<2x?xf32>
  func.return
}
