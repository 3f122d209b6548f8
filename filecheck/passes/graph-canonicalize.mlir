// RUN: gnomon-opt %s -p graph-canonicalize | filecheck %s
// RUN: gnomon-opt %s -p graph-canonicalize --print-debuginfo | filecheck %s --check-prefix=LOC
// The graph ops declare these patterns (HasCanonicalizationPatternsTrait): xDSL's canonicalize applies them.
// RUN: gnomon-opt %s -p canonicalize | filecheck %s
// RUN: xdsl-opt %s -p canonicalize | filecheck %s

// Identity data movement disappears.

// CHECK-LABEL: func.func @identity_reshape(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT:    func.return %[[X]] : tensor<2x3xf32>
func.func @identity_reshape(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = graph.reshape %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @identity_expand(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT:    func.return %[[X]] : tensor<2x3xf32>
func.func @identity_expand(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = graph.expand %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @identity_transpose(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT:    func.return %[[X]] : tensor<2x3x4xf32>
func.func @identity_transpose(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = graph.transpose %x {permutation = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  func.return %0 : tensor<2x3x4xf32>
}

// A clip without bounds (ONNX's Clip without min and max) is its input; a one-sided clip stays.

// CHECK-LABEL: func.func @unbounded_clip(
// CHECK-SAME:      %[[X:.*]]: tensor<3xi8>)
// CHECK-NEXT:    %[[Y:.*]] = graph.clip %[[X]] {min = 0.000000e+00 : f64, max = 0x7ff0000000000000 : f64}
// CHECK-NEXT:    func.return %[[X]], %[[Y]] : tensor<3xi8>, tensor<3xi8>
func.func @unbounded_clip(%x: tensor<3xi8>) -> (tensor<3xi8>, tensor<3xi8>) {
  %0 = graph.clip %x {min = 0xFFF0000000000000 : f64, max = 0x7FF0000000000000 : f64} : (tensor<3xi8>) -> tensor<3xi8>
  %1 = graph.clip %x {min = 0.0 : f64, max = 0x7FF0000000000000 : f64} : (tensor<3xi8>) -> tensor<3xi8>
  func.return %0, %1 : tensor<3xi8>, tensor<3xi8>
}

// A chain of reshapes is one reshape; one that ends where it started is none.

// CHECK-LABEL: func.func @reshape_chain(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT:    %[[Y:.*]] = graph.reshape %[[X]] : (tensor<2x3x4xf32>) -> tensor<4x6xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<4x6xf32>
func.func @reshape_chain(%x: tensor<2x3x4xf32>) -> tensor<4x6xf32> {
  %0 = graph.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %1 = graph.reshape %0 : (tensor<6x4xf32>) -> tensor<24xf32>
  %2 = graph.reshape %1 : (tensor<24xf32>) -> tensor<4x6xf32>
  func.return %2 : tensor<4x6xf32>
}

// CHECK-LABEL: func.func @reshape_round_trip(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT:    func.return %[[X]] : tensor<2x3xf32>
func.func @reshape_round_trip(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = graph.reshape %x : (tensor<2x3xf32>) -> tensor<6xf32>
  %1 = graph.reshape %0 : (tensor<6xf32>) -> tensor<2x3xf32>
  func.return %1 : tensor<2x3xf32>
}

// Transposes compose: result dim i of the outer one is input dim p[q[i]].

// CHECK-LABEL: func.func @transpose_chain(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT:    %[[Y:.*]] = graph.transpose %[[X]] {permutation = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<3x2x4xf32>
func.func @transpose_chain(%x: tensor<2x3x4xf32>) -> tensor<3x2x4xf32> {
  %0 = graph.transpose %x {permutation = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %1 = graph.transpose %0 {permutation = array<i64: 0, 2, 1>} : (tensor<3x4x2xf32>) -> tensor<3x2x4xf32>
  func.return %1 : tensor<3x2x4xf32>
}

// CHECK-LABEL: func.func @transpose_inverse(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT:    func.return %[[X]] : tensor<2x3xf32>
func.func @transpose_inverse(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = graph.transpose %x {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = graph.transpose %0 {permutation = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  func.return %1 : tensor<2x3xf32>
}

// x @ wᵀ + b (ONNX Gemm with transB) is one linear layer, at the product's location; the bias may
// be either operand of the add.

// CHECK-LABEL: func.func @gemm(
// CHECK-SAME:      %[[X:.*]]: tensor<2x8xf32>, %[[W:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[Y:.*]] = graph.linear %[[X]], %[[W]], %[[B]] : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<2x4xf32>
// LOC-LABEL:   func.func @gemm(
// LOC:           graph.linear {{.*}} loc("fc")
func.func @gemm(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  %wt = graph.transpose %w {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32> loc("fc.transpose")
  %0 = graph.matmul %x, %wt : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32> loc("fc")
  %1 = graph.add %0, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("fc.bias")
  func.return %1 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @gemm_bias_first(
// CHECK-SAME:      %[[X:.*]]: tensor<2x8xf32>, %[[W:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[Y:.*]] = graph.linear %[[X]], %[[W]], %[[B]] : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<2x4xf32>
func.func @gemm_bias_first(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  %wt = graph.transpose %w {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %0 = graph.matmul %x, %wt : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %1 = graph.add %b, %0 : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %1 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @matmul_transposed_weight(
// CHECK-SAME:      %[[X:.*]]: tensor<2x8xf32>, %[[W:.*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[Y:.*]] = graph.linear %[[X]], %[[W]] : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<2x4xf32>
func.func @matmul_transposed_weight(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>) -> tensor<2x4xf32> {
  %wt = graph.transpose %w {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %0 = graph.matmul %x, %wt : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  func.return %0 : tensor<2x4xf32>
}

// The product is used besides the add, so the add stays.

// CHECK-LABEL: func.func @product_used_twice(
// CHECK-SAME:      %[[X:.*]]: tensor<2x8xf32>, %[[W:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[P:.*]] = graph.linear %[[X]], %[[W]] : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[S:.*]] = graph.add %[[P]], %[[B]] : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    func.return %[[P]], %[[S]] : tensor<2x4xf32>, tensor<2x4xf32>
func.func @product_used_twice(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %wt = graph.transpose %w {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %0 = graph.matmul %x, %wt : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %1 = graph.add %0, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  func.return %0, %1 : tensor<2x4xf32>, tensor<2x4xf32>
}

// CHECK-LABEL: func.func @plain_matmul(
// CHECK-NEXT:    graph.matmul
// CHECK-NEXT:    func.return
func.func @plain_matmul(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) -> tensor<2x4xf32> {
  %0 = graph.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  func.return %0 : tensor<2x4xf32>
}

// A product by a constant matrix that only it reads (ONNX's MatMul by a transposed initializer) is a linear
// layer: the constant is transposed here, once, and the bias add joins it.

// CHECK-LABEL: func.func @matmul_by_constant(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3x2xf32>, %[[B:.*]]: tensor<3xf32>)
// CHECK-NEXT:    %[[WT:.*]] = graph.constant {value = dense<{{\[\[}}1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00], [3.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>}
// CHECK-NEXT:    %[[Y:.*]] = graph.linear %[[X]], %[[WT]], %[[B]] : (tensor<2x3x2xf32>, tensor<3x2xf32>, tensor<3xf32>) -> tensor<2x3x3xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<2x3x3xf32>
func.func @matmul_by_constant(%x: tensor<2x3x2xf32>, %b: tensor<3xf32>) -> tensor<2x3x3xf32> {
  %w = graph.constant {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %0 = graph.matmul %x, %w : (tensor<2x3x2xf32>, tensor<2x3xf32>) -> tensor<2x3x3xf32>
  %1 = graph.add %0, %b : (tensor<2x3x3xf32>, tensor<3xf32>) -> tensor<2x3x3xf32>
  func.return %1 : tensor<2x3x3xf32>
}

// A constant matrix read twice (a tied embedding and output layer) stays one constant, and the product a matmul.

// CHECK-LABEL: func.func @shared_constant(
// CHECK:         graph.matmul
// CHECK:         graph.matmul
func.func @shared_constant(%x: tensor<2x2xf32>, %y: tensor<2x2xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %w = graph.constant {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
  %0 = graph.matmul %x, %w : (tensor<2x2xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = graph.matmul %y, %w : (tensor<2x2xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}

// Small integer computations, the shape arithmetic ONNX exporters emit, fold to one constant at
// the location of the op that produced it; the ops that fed it are dead and go.

// CHECK-LABEL: func.func @shape_arithmetic(
// CHECK-NEXT:    %[[C:.*]] = graph.constant {value = dense<[-7, -6]> : tensor<2xi64>} : () -> tensor<2xi64>
// CHECK-NEXT:    func.return %[[C]] : tensor<2xi64>
// LOC-LABEL:   func.func @shape_arithmetic(
// LOC-NEXT:      graph.constant {{.*}} loc("shape.neg")
func.func @shape_arithmetic() -> tensor<2xi64> {
  %s = graph.constant {value = dense<[2, 3, 4]> : tensor<3xi64>} : () -> tensor<3xi64>
  %i0 = graph.constant {value = dense<0> : tensor<1xi64>} : () -> tensor<1xi64>
  %i1 = graph.constant {value = dense<1> : tensor<1xi64>} : () -> tensor<1xi64>
  %i2 = graph.constant {value = dense<2> : tensor<1xi64>} : () -> tensor<1xi64>
  %d0 = graph.gather %s, %i0 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %d1 = graph.gather %s, %i1 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %d2 = graph.gather %s, %i2 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %m = graph.mul %d0, %d1 : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %shape = graph.concat %m, %d2 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %tail = graph.slice %s {starts = array<i64: 1>, ends = array<i64: 3>, steps = array<i64: 1>} : (tensor<3xi64>) -> tensor<2xi64>
  %sum = graph.add %shape, %tail : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %diff = graph.sub %sum, %i2 : (tensor<2xi64>, tensor<1xi64>) -> tensor<2xi64>
  %neg = graph.neg %diff : (tensor<2xi64>) -> tensor<2xi64> loc("shape.neg")
  func.return %neg : tensor<2xi64>
}

// Integer division truncates towards zero: [6, 7] / [-4, 2] = [-1, 3].

// CHECK-LABEL: func.func @integer_division(
// CHECK-NEXT:    %[[C:.*]] = graph.constant {value = dense<[3, 1]> : tensor<2xi64>} : () -> tensor<2xi64>
// CHECK-NEXT:    func.return %[[C]] : tensor<2xi64>
func.func @integer_division() -> tensor<2xi64> {
  %a = graph.constant {value = dense<[6, 7]> : tensor<2xi64>} : () -> tensor<2xi64>
  %b = graph.constant {value = dense<[-4, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %q = graph.div %a, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %d = graph.sub %q, %b : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  func.return %d : tensor<2xi64>
}

// CHECK-LABEL: func.func @integer_data_movement(
// CHECK-NEXT:    %[[C:.*]] = graph.constant {value = dense<{{\[\[}}1], [2]]> : tensor<2x1xi32>} : () -> tensor<2x1xi32>
// CHECK-NEXT:    %[[E:.*]] = graph.constant {value = dense<{{\[\[}}1, 1, 1], [2, 2, 2]]> : tensor<2x3xi64>} : () -> tensor<2x3xi64>
// CHECK-NEXT:    func.return %[[C]], %[[E]] : tensor<2x1xi32>, tensor<2x3xi64>
func.func @integer_data_movement() -> (tensor<2x1xi32>, tensor<2x3xi64>) {
  %a = graph.constant {value = dense<[1, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
  %r = graph.reshape %a : (tensor<2xi64>) -> tensor<1x2xi64>
  %t = graph.transpose %r {permutation = array<i64: 1, 0>} : (tensor<1x2xi64>) -> tensor<2x1xi64>
  %c = graph.cast %t : (tensor<2x1xi64>) -> tensor<2x1xi32>
  %e = graph.expand %t : (tensor<2x1xi64>) -> tensor<2x3xi64>
  func.return %c, %e : tensor<2x1xi32>, tensor<2x3xi64>
}

// Float computations are not folded (that would be folding weights).

// CHECK-LABEL: func.func @float_constants(
// CHECK-NEXT:    %[[A:.*]] = graph.constant {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>} : () -> tensor<2xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.add %[[A]], %[[A]] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK-NEXT:    func.return %[[B]] : tensor<2xf32>
func.func @float_constants() -> tensor<2xf32> {
  %a = graph.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %b = graph.add %a, %a : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %b : tensor<2xf32>
}

// Ops whose results are unused are erased.

// CHECK-LABEL: func.func @dead_code(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT:    %[[Y:.*]] = graph.sigmoid %[[X]] : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<2x3xf32>
func.func @dead_code(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = graph.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = graph.exp %0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = graph.sigmoid %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %2 : tensor<2x3xf32>
}

// A constant exponent of 2 is a square and 1 the base itself: no pow call per element in generated code.
// CHECK-LABEL: func.func @constant_pow(
// CHECK-NEXT:    %[[S:.*]] = graph.mul %[[X:.*]], %[[X]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[H:.*]] = graph.pow %[[S]], %{{.*}} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %[[H]]
func.func @constant_pow(%x: tensor<4x8xf32>, %e: tensor<f32>) -> tensor<4x8xf32> {
  %two = graph.constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %s = graph.pow %x, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %one = graph.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %i = graph.pow %s, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %h = graph.pow %i, %e : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  func.return %h : tensor<4x8xf32>
}

// x * sigmoid(x), either way round, is silu(x) (ONNX's SiLU); x * hard_sigmoid(x) with alpha 1/6, beta 1/2 is
// hard_swish(x). A product with another value's sigmoid, or another hard sigmoid, stays.
// CHECK-LABEL: func.func @activation_products(
// CHECK-NEXT:    %[[A:.*]] = graph.silu %[[X:.*]] : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    %[[B:.*]] = graph.silu %[[X]] : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    %[[C:.*]] = graph.hard_swish %[[X]] : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    %[[G:.*]] = graph.sigmoid %[[Z:.*]] : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    %[[D:.*]] = graph.mul %[[X]], %[[G]]
// CHECK-NEXT:    %[[H:.*]] = graph.hard_sigmoid %[[X]] {alpha = 2.000000e-01 : f64, beta = 5.000000e-01 : f64}
// CHECK-NEXT:    %[[E:.*]] = graph.mul %[[X]], %[[H]]
// CHECK-NEXT:    func.return %[[A]], %[[B]], %[[C]], %[[D]], %[[E]]
func.func @activation_products(%x: tensor<2x8xf32>, %z: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %s = graph.sigmoid %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = graph.mul %x, %s : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %b = graph.mul %s, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %hs = graph.hard_sigmoid %x {alpha = 0.16666666666666666 : f64, beta = 0.5 : f64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %c = graph.mul %x, %hs : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %g = graph.sigmoid %z : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %d = graph.mul %x, %g : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %h = graph.hard_sigmoid %x {alpha = 0.2 : f64, beta = 0.5 : f64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %e = graph.mul %x, %h : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return %a, %b, %c, %d, %e : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// Dropout draws at random: two on the same input are two draws, and an unused one still draws (later dropouts'
// masks follow from the generator's state), so neither is merged nor erased.
// CHECK-LABEL: func.func @dropout_draws
// CHECK-NEXT:    %{{.*}}, %{{.*}} = graph.dropout_train %[[X:.*]] {ratio = 1.000000e-01 : f64}
// CHECK-NEXT:    %[[Y:.*]], %{{.*}} = graph.dropout_train %[[X]] {ratio = 1.000000e-01 : f64}
// CHECK-NEXT:    %[[Z:.*]], %{{.*}} = graph.dropout_train %[[X]] {ratio = 1.000000e-01 : f64}
// CHECK-NEXT:    func.return %[[Y]], %[[Z]]
func.func @dropout_draws(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %unused, %m0 = graph.dropout_train %x {ratio = 0.1 : f64} : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xi1>)
  %y, %m1 = graph.dropout_train %x {ratio = 0.1 : f64} : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xi1>)
  %z, %m2 = graph.dropout_train %x {ratio = 0.1 : f64} : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xi1>)
  func.return %y, %z : tensor<2x8xf32>, tensor<2x8xf32>
}

// A where whose condition is one constant selects an operand; `x and true` is x.

// CHECK-LABEL: func.func @constant_conditions(
// CHECK-NEXT:    func.return %a, %b, %p
func.func @constant_conditions(%a: tensor<4xf32>, %b: tensor<4xf32>, %p: tensor<i1>) -> (tensor<4xf32>, tensor<4xf32>, tensor<i1>) {
  %t = graph.constant {value = dense<true> : tensor<i1>} : () -> tensor<i1>
  %f = graph.constant {value = dense<false> : tensor<4xi1>} : () -> tensor<4xi1>
  %x = graph.where %t, %a, %b : (tensor<i1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = graph.where %f, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %q = graph.and %p, %t : (tensor<i1>, tensor<i1>) -> tensor<i1>
  func.return %x, %y, %q : tensor<4xf32>, tensor<4xf32>, tensor<i1>
}

// A loop whose condition tests a counter that steps by one from a constant gets its bound: before each trip
// (`i < 6` from 2: 4 trips), or, as torch's while_loop carries it, in a flag the body computes after each trip.

// CHECK-LABEL: func.func @counted_before(
// CHECK:         graph.while {{.*}} {max_trips = 4 : i64} cond {
func.func @counted_before(%x: tensor<4xf32>) -> tensor<4xf32> {
  %two = graph.constant {value = dense<2> : tensor<i64>} : () -> tensor<i64>
  %n, %h = graph.while (%two, %x) : (tensor<i64>, tensor<4xf32>) -> (tensor<i64>, tensor<4xf32>) cond {
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %six = graph.constant {value = dense<6> : tensor<i64>} : () -> tensor<i64>
    %lt = graph.lt %i, %six : (tensor<i64>, tensor<i64>) -> tensor<i1>
    %s = graph.reduce_sum %a {axes = array<i64>, keepdims = false} : (tensor<4xf32>) -> tensor<f32>
    %z = graph.constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %pos = graph.gt %s, %z : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %go = graph.and %pos, %lt : (tensor<i1>, tensor<i1>) -> tensor<i1>
    graph.yield %go : tensor<i1>
  } do {
  ^bb0(%i: tensor<i64>, %a: tensor<4xf32>):
    %one = graph.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %next = graph.add %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %t = graph.tanh %a : (tensor<4xf32>) -> tensor<4xf32>
    graph.yield %next, %t : tensor<i64>, tensor<4xf32>
  }
  func.return %h : tensor<4xf32>
}

// CHECK-LABEL: func.func @counted_after(
// CHECK:         graph.while {{.*}} {max_trips = 3 : i64} cond {
func.func @counted_after(%x: tensor<4xf32>, %go0: tensor<i1>) -> tensor<4xf32> {
  %zero = graph.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %g, %n, %h = graph.while (%go0, %zero, %x) : (tensor<i1>, tensor<i64>, tensor<4xf32>) -> (tensor<i1>, tensor<i64>, tensor<4xf32>) cond {
  ^bb0(%go: tensor<i1>, %i: tensor<i64>, %a: tensor<4xf32>):
    graph.yield %go : tensor<i1>
  } do {
  ^bb0(%go: tensor<i1>, %i: tensor<i64>, %a: tensor<4xf32>):
    %one = graph.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %next = graph.add %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %three = graph.constant {value = dense<3> : tensor<i64>} : () -> tensor<i64>
    %more = graph.lt %next, %three : (tensor<i64>, tensor<i64>) -> tensor<i1>
    %t = graph.tanh %a : (tensor<4xf32>) -> tensor<4xf32>
    graph.yield %more, %next, %t : tensor<i1>, tensor<i64>, tensor<4xf32>
  }
  func.return %h : tensor<4xf32>
}

// A pad by -inf (in f32: torch-mlir's lowering of ONNX's uneven MaxPool pads) becomes the pool's own padding.

// CHECK-LABEL: func.func @pad_into_max_pool(
// CHECK-SAME:      %[[X:.*]]: tensor<1x8x6x6xf32>)
// CHECK-NEXT:    %[[Y:.*]] = graph.max_pool %[[X]] {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 0, 2, 1>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x8x6x6xf32>) -> tensor<1x8x4x3xf32>
// CHECK-NEXT:    func.return %[[Y]]
// LOC-LABEL:   func.func @pad_into_max_pool(
// LOC-NEXT:      graph.max_pool {{.*}} loc("pool")
func.func @pad_into_max_pool(%x: tensor<1x8x6x6xf32>) -> tensor<1x8x4x3xf32> {
  %p = graph.pad %x {pads = array<i64: 0, 0, 0, 0, 0, 0, 1, 1>, mode = "constant", value = -1.7976931348623157e+308 : f64} : (tensor<1x8x6x6xf32>) -> tensor<1x8x7x7xf32> loc("pad")
  %y = graph.max_pool %p {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 0, 1, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x8x7x7xf32>) -> tensor<1x8x4x3xf32> loc("pool")
  func.return %y : tensor<1x8x4x3xf32>
}

// A finite pad value can win a window (a window of -inf elements, or of padding alone): the pad stays; so does a
// pad of the channels, and a pad by -inf in f64 only.

// CHECK-LABEL: func.func @pad_stays_before_max_pool(
// CHECK-COUNT-3: graph.pad
func.func @pad_stays_before_max_pool(%x: tensor<1x8x6x6xf32>, %d: tensor<1x8x6x6xf64>) -> (tensor<1x8x3x3xf32>, tensor<1x9x3x3xf32>, tensor<1x8x3x3xf64>) {
  %p = graph.pad %x {pads = array<i64: 0, 0, 0, 0, 0, 0, 1, 1>, mode = "constant", value = -3.0e+38 : f64} : (tensor<1x8x6x6xf32>) -> tensor<1x8x7x7xf32>
  %y = graph.max_pool %p {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x8x7x7xf32>) -> tensor<1x8x3x3xf32>
  %q = graph.pad %x {pads = array<i64: 0, 0, 0, 0, 0, 1, 1, 1>, mode = "constant", value = 0xFFF0000000000000 : f64} : (tensor<1x8x6x6xf32>) -> tensor<1x9x7x7xf32>
  %z = graph.max_pool %q {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x9x7x7xf32>) -> tensor<1x9x3x3xf32>
  %r = graph.pad %d {pads = array<i64: 0, 0, 0, 0, 0, 0, 1, 1>, mode = "constant", value = -1.7976931348623157e+308 : f64} : (tensor<1x8x6x6xf64>) -> tensor<1x8x7x7xf64>
  %w = graph.max_pool %r {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x8x7x7xf64>) -> tensor<1x8x3x3xf64>
  func.return %y, %z, %w : tensor<1x8x3x3xf32>, tensor<1x9x3x3xf32>, tensor<1x8x3x3xf64>
}
