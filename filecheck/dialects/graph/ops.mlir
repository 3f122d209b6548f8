// RUN: gnomon-opt %s | gnomon-opt | filecheck %s
// RUN: GNOMON_ROUNDTRIP
// RUN: gnomon-opt %s -o %t.mlir && gnomon-opt %t.mlir | diff %t.mlir -

// Every graph op in its custom form: print, parse and print again give the same text, and the
// generic form parses back to it. Covers `?` dims, optional operands present and absent, and the
// variadic ops (concat, split, the affine pair of the normalizations).

func.func @named_dims(%x: tensor<?x4xf32, #graph.dims<["N", ""]>>) {
  // CHECK-LABEL: func.func @named_dims(
  %r = graph.relu %x : (tensor<?x4xf32, #graph.dims<["N", ""]>>) -> tensor<?x4xf32, #graph.dims<["N", ""]>>
  // CHECK-NEXT: %{{.*}} = graph.relu %{{.*}} : (tensor<?x4xf32, #graph.dims<["N", ""]>>) -> tensor<?x4xf32, #graph.dims<["N", ""]>>
  func.return
}

func.func @unary(%x: tensor<?x4xf32>, %b: tensor<4xi1>) {
  // CHECK-LABEL: func.func @unary(
  %abs = graph.abs %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.abs %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %acos = graph.acos %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.acos %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %acosh = graph.acosh %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.acosh %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %asin = graph.asin %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.asin %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %asinh = graph.asinh %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.asinh %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %atan = graph.atan %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.atan %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %atanh = graph.atanh %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.atanh %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %ceil = graph.ceil %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.ceil %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %cos = graph.cos %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.cos %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %erf = graph.erf %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.erf %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %exp = graph.exp %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.exp %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %floor = graph.floor %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.floor %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %hard_swish = graph.hard_swish %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.hard_swish %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %log = graph.log %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.log %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %neg = graph.neg %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.neg %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %not = graph.not %b : (tensor<4xi1>) -> tensor<4xi1>
  // CHECK-NEXT: %{{.*}} = graph.not %{{.*}} : (tensor<4xi1>) -> tensor<4xi1>
  %reciprocal = graph.reciprocal %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.reciprocal %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %relu = graph.relu %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.relu %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %round = graph.round %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.round %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %rsqrt = graph.rsqrt %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.rsqrt %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %selu = graph.selu %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.selu %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %sigmoid = graph.sigmoid %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.sigmoid %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %sign = graph.sign %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.sign %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %silu = graph.silu %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.silu %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %sin = graph.sin %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.sin %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %sinh = graph.sinh %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.sinh %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %softsign = graph.softsign %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.softsign %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %sqrt = graph.sqrt %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.sqrt %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %tanh = graph.tanh %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.tanh %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %gelu = graph.gelu %x {approximate = "tanh"} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.gelu %{{.*}} {approximate = "tanh"} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %gelu_default = graph.gelu %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.gelu %{{.*}} {approximate = "none"} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %elu = graph.elu %x {alpha = 1.0 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.elu %{{.*}} {alpha = 1.000000e+00 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %leaky_relu = graph.leaky_relu %x {alpha = 0.01 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.leaky_relu %{{.*}} {alpha = 1.000000e-02 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %softplus = graph.softplus %x {beta = 1.0 : f64, threshold = 20.0 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.softplus %{{.*}} {beta = 1.000000e+00 : f64, threshold = 2.000000e+01 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %hard_sigmoid = graph.hard_sigmoid %x {alpha = 0.2 : f64, beta = 0.5 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.hard_sigmoid %{{.*}} {alpha = 2.000000e-01 : f64, beta = 5.000000e-01 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %clip = graph.clip %x {min = 0.0 : f64, max = 6.0 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.clip %{{.*}} {min = 0.000000e+00 : f64, max = 6.000000e+00 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %clip_inf = graph.clip %x {min = 0xFFF0000000000000 : f64, max = 0x7FF0000000000000 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.clip %{{.*}} {min = 0xfff0000000000000 : f64, max = 0x7ff0000000000000 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %dropout = graph.dropout %x {ratio = 0.5 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.dropout %{{.*}} {ratio = 5.000000e-01 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %dropped, %kept = graph.dropout_train %x {ratio = 0.25 : f64} : (tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xi1>)
  // CHECK-NEXT: %{{.*}}, %{{.*}} = graph.dropout_train %{{.*}} {ratio = 2.500000e-01 : f64} : (tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xi1>)
  %cast = graph.cast %x : (tensor<?x4xf32>) -> tensor<?x4xi64>
  // CHECK-NEXT: %{{.*}} = graph.cast %{{.*}} : (tensor<?x4xf32>) -> tensor<?x4xi64>
  func.return
  // CHECK-NEXT: func.return
}

func.func @binary(%a: tensor<2x4xf32>, %v: tensor<4xf32>, %d: tensor<?x1xf32>, %p: tensor<1xi1>, %q: tensor<3x1xi1>, %s: tensor<f32>) {
  // CHECK-LABEL: func.func @binary(
  %add = graph.add %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.add %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %add_dyn = graph.add %d, %v : (tensor<?x1xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.add %{{.*}}, %{{.*}} : (tensor<?x1xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  %and = graph.and %p, %q : (tensor<1xi1>, tensor<3x1xi1>) -> tensor<3x1xi1>
  // CHECK-NEXT: %{{.*}} = graph.and %{{.*}}, %{{.*}} : (tensor<1xi1>, tensor<3x1xi1>) -> tensor<3x1xi1>
  %div = graph.div %a, %s : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.div %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %fmod = graph.fmod %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.fmod %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %max = graph.max %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.max %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %min = graph.min %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.min %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %mul = graph.mul %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.mul %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %or = graph.or %p, %q : (tensor<1xi1>, tensor<3x1xi1>) -> tensor<3x1xi1>
  // CHECK-NEXT: %{{.*}} = graph.or %{{.*}}, %{{.*}} : (tensor<1xi1>, tensor<3x1xi1>) -> tensor<3x1xi1>
  %pow = graph.pow %a, %s : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.pow %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %prelu = graph.prelu %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.prelu %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %rem = graph.rem %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.rem %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %sub = graph.sub %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.sub %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %eq = graph.eq %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  // CHECK-NEXT: %{{.*}} = graph.eq %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  %ge = graph.ge %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  // CHECK-NEXT: %{{.*}} = graph.ge %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  %gt = graph.gt %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  // CHECK-NEXT: %{{.*}} = graph.gt %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  %le = graph.le %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  // CHECK-NEXT: %{{.*}} = graph.le %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  %lt = graph.lt %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  // CHECK-NEXT: %{{.*}} = graph.lt %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  %ne = graph.ne %a, %v : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  // CHECK-NEXT: %{{.*}} = graph.ne %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xi1>
  %where = graph.where %eq, %a, %s : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  func.return
  // CHECK-NEXT: func.return
}

func.func @bitwise(%i: tensor<2x4xi32>, %v: tensor<4xi32>, %u: tensor<3xui64>) {
  // CHECK-LABEL: func.func @bitwise(
  %and = graph.bitwise_and %i, %v : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
  // CHECK-NEXT: %{{.*}} = graph.bitwise_and %{{.*}}, %{{.*}} : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
  %or = graph.bitwise_or %i, %v : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
  // CHECK-NEXT: %{{.*}} = graph.bitwise_or %{{.*}}, %{{.*}} : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
  %xor = graph.bitwise_xor %u, %u : (tensor<3xui64>, tensor<3xui64>) -> tensor<3xui64>
  // CHECK-NEXT: %{{.*}} = graph.bitwise_xor %{{.*}}, %{{.*}} : (tensor<3xui64>, tensor<3xui64>) -> tensor<3xui64>
  %not = graph.bitwise_not %u : (tensor<3xui64>) -> tensor<3xui64>
  // CHECK-NEXT: %{{.*}} = graph.bitwise_not %{{.*}} : (tensor<3xui64>) -> tensor<3xui64>
  %shl = graph.shift_left %i, %v : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
  // CHECK-NEXT: %{{.*}} = graph.shift_left %{{.*}}, %{{.*}} : (tensor<2x4xi32>, tensor<4xi32>) -> tensor<2x4xi32>
  %shr = graph.shift_right %u, %u : (tensor<3xui64>, tensor<3xui64>) -> tensor<3xui64>
  // CHECK-NEXT: %{{.*}} = graph.shift_right %{{.*}}, %{{.*}} : (tensor<3xui64>, tensor<3xui64>) -> tensor<3xui64>
  %bitcast = graph.bitcast %u : (tensor<3xui64>) -> tensor<3xf64>
  // CHECK-NEXT: %{{.*}} = graph.bitcast %{{.*}} : (tensor<3xui64>) -> tensor<3xf64>
  func.return
  // CHECK-NEXT: func.return
}

func.func @linalg(%a: tensor<8x16x32xf32>, %b: tensor<32x64xf32>, %v: tensor<32xf32>, %x: tensor<?x2048xf32>, %w: tensor<1000x2048xf32>, %bias: tensor<1000xf32>, %m: tensor<?x3x3xf64>) {
  // CHECK-LABEL: func.func @linalg(
  %matmul = graph.matmul %a, %b : (tensor<8x16x32xf32>, tensor<32x64xf32>) -> tensor<8x16x64xf32>
  // CHECK-NEXT: %{{.*}} = graph.matmul %{{.*}}, %{{.*}} : (tensor<8x16x32xf32>, tensor<32x64xf32>) -> tensor<8x16x64xf32>
  %matvec = graph.matmul %a, %v : (tensor<8x16x32xf32>, tensor<32xf32>) -> tensor<8x16xf32>
  // CHECK-NEXT: %{{.*}} = graph.matmul %{{.*}}, %{{.*}} : (tensor<8x16x32xf32>, tensor<32xf32>) -> tensor<8x16xf32>
  %vecmat = graph.matmul %v, %b : (tensor<32xf32>, tensor<32x64xf32>) -> tensor<64xf32>
  // CHECK-NEXT: %{{.*}} = graph.matmul %{{.*}}, %{{.*}} : (tensor<32xf32>, tensor<32x64xf32>) -> tensor<64xf32>
  %linear = graph.linear %x, %w, %bias : (tensor<?x2048xf32>, tensor<1000x2048xf32>, tensor<1000xf32>) -> tensor<?x1000xf32>
  // CHECK-NEXT: %{{.*}} = graph.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x2048xf32>, tensor<1000x2048xf32>, tensor<1000xf32>) -> tensor<?x1000xf32>
  %linear_no_bias = graph.linear %x, %w : (tensor<?x2048xf32>, tensor<1000x2048xf32>) -> tensor<?x1000xf32>
  // CHECK-NEXT: %{{.*}} = graph.linear %{{.*}}, %{{.*}} : (tensor<?x2048xf32>, tensor<1000x2048xf32>) -> tensor<?x1000xf32>
  %det = graph.det %m : (tensor<?x3x3xf64>) -> tensor<?xf64>
  // CHECK-NEXT: %{{.*}} = graph.det %{{.*}} : (tensor<?x3x3xf64>) -> tensor<?xf64>
  func.return
  // CHECK-NEXT: func.return
}

func.func @conv(%x: tensor<1x3x224x224xf32>, %w: tensor<64x3x7x7xf32>, %b: tensor<64xf32>, %xd: tensor<?x8x10xf32>, %dw: tensor<8x1x3xf32>, %x3: tensor<1x2x4x4x4xf32>, %w3: tensor<4x2x3x3x3xf32>, %t: tensor<1x8x4x4xf32>, %tw: tensor<8x4x3x3xf32>, %tb: tensor<4xf32>) {
  // CHECK-LABEL: func.func @conv(
  %conv = graph.conv %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>) -> tensor<1x64x112x112xf32>
  // CHECK-NEXT: %{{.*}} = graph.conv %{{.*}}, %{{.*}}, %{{.*}} {strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>) -> tensor<1x64x112x112xf32>
  %conv_no_bias = graph.conv %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32>) -> tensor<1x64x112x112xf32>
  // CHECK-NEXT: %{{.*}} = graph.conv %{{.*}}, %{{.*}} {strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32>) -> tensor<1x64x112x112xf32>
  %depthwise = graph.conv %xd, %dw {strides = array<i64: 1>, pads = array<i64: 1, 1>, dilations = array<i64: 2>, groups = 8 : i64} : (tensor<?x8x10xf32>, tensor<8x1x3xf32>) -> tensor<?x8x8xf32>
  // CHECK-NEXT: %{{.*}} = graph.conv %{{.*}}, %{{.*}} {strides = array<i64: 1>, pads = array<i64: 1, 1>, dilations = array<i64: 2>, groups = 8 : i64} : (tensor<?x8x10xf32>, tensor<8x1x3xf32>) -> tensor<?x8x8xf32>
  %conv3d = graph.conv %x3, %w3 {strides = array<i64: 1, 1, 1>, pads = array<i64: 0, 0, 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1>, groups = 1 : i64} : (tensor<1x2x4x4x4xf32>, tensor<4x2x3x3x3xf32>) -> tensor<1x4x2x2x2xf32>
  // CHECK-NEXT: %{{.*}} = graph.conv %{{.*}}, %{{.*}} {strides = array<i64: 1, 1, 1>, pads = array<i64: 0, 0, 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1>, groups = 1 : i64} : (tensor<1x2x4x4x4xf32>, tensor<4x2x3x3x3xf32>) -> tensor<1x4x2x2x2xf32>
  %conv_transpose = graph.conv_transpose %t, %tw, %tb {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x8x4x4xf32>, tensor<8x4x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  // CHECK-NEXT: %{{.*}} = graph.conv_transpose %{{.*}}, %{{.*}}, %{{.*}} {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x8x4x4xf32>, tensor<8x4x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %conv_transpose_no_bias = graph.conv_transpose %t, %tw {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x8x4x4xf32>, tensor<8x4x3x3xf32>) -> tensor<1x4x8x8xf32>
  // CHECK-NEXT: %{{.*}} = graph.conv_transpose %{{.*}}, %{{.*}} {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x8x4x4xf32>, tensor<8x4x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return
  // CHECK-NEXT: func.return
}

func.func @pool(%x: tensor<1x64x112x112xf32>, %y: tensor<1x8x5x5xf32>, %z: tensor<?x8x?x?xf32>) {
  // CHECK-LABEL: func.func @pool(
  %max_pool = graph.max_pool %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x64x112x112xf32>) -> tensor<1x64x56x56xf32>
  // CHECK-NEXT: %{{.*}} = graph.max_pool %{{.*}} {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x64x112x112xf32>) -> tensor<1x64x56x56xf32>
  %max_pool_ceil = graph.max_pool %y {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = true} : (tensor<1x8x5x5xf32>) -> tensor<1x8x3x3xf32>
  // CHECK-NEXT: %{{.*}} = graph.max_pool %{{.*}} {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = true} : (tensor<1x8x5x5xf32>) -> tensor<1x8x3x3xf32>
  %avg_pool = graph.avg_pool %y {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = false} : (tensor<1x8x5x5xf32>) -> tensor<1x8x2x2xf32>
  // CHECK-NEXT: %{{.*}} = graph.avg_pool %{{.*}} {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = false} : (tensor<1x8x5x5xf32>) -> tensor<1x8x2x2xf32>
  %avg_pool_dyn = graph.avg_pool %z {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, ceil_mode = true, count_include_pad = true} : (tensor<?x8x?x?xf32>) -> tensor<?x8x?x?xf32>
  // CHECK-NEXT: %{{.*}} = graph.avg_pool %{{.*}} {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, ceil_mode = true, count_include_pad = true} : (tensor<?x8x?x?xf32>) -> tensor<?x8x?x?xf32>
  %global_avg_pool = graph.global_avg_pool %x : (tensor<1x64x112x112xf32>) -> tensor<1x64x1x1xf32>
  // CHECK-NEXT: %{{.*}} = graph.global_avg_pool %{{.*}} : (tensor<1x64x112x112xf32>) -> tensor<1x64x1x1xf32>
  %global_max_pool = graph.global_max_pool %z : (tensor<?x8x?x?xf32>) -> tensor<?x8x1x1xf32>
  // CHECK-NEXT: %{{.*}} = graph.global_max_pool %{{.*}} : (tensor<?x8x?x?xf32>) -> tensor<?x8x1x1xf32>
  %adaptive_avg_pool = graph.adaptive_avg_pool %x {output_size = array<i64: 7, 7>} : (tensor<1x64x112x112xf32>) -> tensor<1x64x7x7xf32>
  // CHECK-NEXT: %{{.*}} = graph.adaptive_avg_pool %{{.*}} {output_size = array<i64: 7, 7>} : (tensor<1x64x112x112xf32>) -> tensor<1x64x7x7xf32>
  %adaptive_max_pool = graph.adaptive_max_pool %z {output_size = array<i64: 1, 1>} : (tensor<?x8x?x?xf32>) -> tensor<?x8x1x1xf32>
  // CHECK-NEXT: %{{.*}} = graph.adaptive_max_pool %{{.*}} {output_size = array<i64: 1, 1>} : (tensor<?x8x?x?xf32>) -> tensor<?x8x1x1xf32>
  func.return
  // CHECK-NEXT: func.return
}

func.func @grid_sample(%x: tensor<1x8x5x5xf32>, %g: tensor<1x3x4x2xf32>, %v: tensor<?x2x4x4x4xf32>, %gv: tensor<?x2x2x2x3xf32>) {
  // CHECK-LABEL: func.func @grid_sample(
  %plane = graph.grid_sample %x, %g {mode = "cubic", padding_mode = "border", align_corners = false} : (tensor<1x8x5x5xf32>, tensor<1x3x4x2xf32>) -> tensor<1x8x3x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.grid_sample %{{.*}}, %{{.*}} {mode = "cubic", padding_mode = "border", align_corners = false} : (tensor<1x8x5x5xf32>, tensor<1x3x4x2xf32>) -> tensor<1x8x3x4xf32>
  %volume = graph.grid_sample %v, %gv {mode = "nearest", padding_mode = "reflection", align_corners = true} : (tensor<?x2x4x4x4xf32>, tensor<?x2x2x2x3xf32>) -> tensor<?x2x2x2x2xf32>
  // CHECK-NEXT: %{{.*}} = graph.grid_sample %{{.*}}, %{{.*}} {mode = "nearest", padding_mode = "reflection", align_corners = true} : (tensor<?x2x4x4x4xf32>, tensor<?x2x2x2x3xf32>) -> tensor<?x2x2x2x2xf32>
  func.return
  // CHECK-NEXT: func.return
}

func.func @norm(%x: tensor<?x16x4x4xf32>, %c: tensor<16xf32>, %s: tensor<2x16x64xf32>, %g: tensor<64xf32>) {
  // CHECK-LABEL: func.func @norm(
  %batch_norm = graph.batch_norm %x, %c, %c, %c, %c {epsilon = 1.0e-05 : f64} : (tensor<?x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16x4x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<?x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16x4x4xf32>
  %y, %mean, %var = graph.batch_norm_train %x, %c, %c {epsilon = 1.0e-05 : f64, momentum = 0.1 : f64} : (tensor<?x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<?x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>)
  // CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = graph.batch_norm_train %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64, momentum = 1.000000e-01 : f64} : (tensor<?x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<?x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>)
  %layer_norm = graph.layer_norm %s, %g, %g {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  // CHECK-NEXT: %{{.*}} = graph.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  %layer_norm_plain = graph.layer_norm %s {axis = -1 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  // CHECK-NEXT: %{{.*}} = graph.layer_norm %{{.*}} {axis = -1 : i64, epsilon = 1.000000e-05 : f64} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %instance_norm = graph.instance_norm %x, %c, %c {epsilon = 1.0e-05 : f64} : (tensor<?x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16x4x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.instance_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<?x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16x4x4xf32>
  %instance_norm_plain = graph.instance_norm %x {epsilon = 1.0e-05 : f64} : (tensor<?x16x4x4xf32>) -> tensor<?x16x4x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.instance_norm %{{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<?x16x4x4xf32>) -> tensor<?x16x4x4xf32>
  %group_norm = graph.group_norm %x, %c, %c {num_groups = 4 : i64, epsilon = 1.0e-05 : f64} : (tensor<?x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16x4x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.group_norm %{{.*}}, %{{.*}}, %{{.*}} {num_groups = 4 : i64, epsilon = 1.000000e-05 : f64} : (tensor<?x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x16x4x4xf32>
  %lrn = graph.lrn %x {size = 5 : i64, alpha = 1.0e-04 : f64, beta = 0.75 : f64, bias = 1.0 : f64} : (tensor<?x16x4x4xf32>) -> tensor<?x16x4x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.lrn %{{.*}} {size = 5 : i64, alpha = 1.000000e-04 : f64, beta = 7.500000e-01 : f64, bias = 1.000000e+00 : f64} : (tensor<?x16x4x4xf32>) -> tensor<?x16x4x4xf32>
  %softmax = graph.softmax %s {axis = -1 : i64} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  // CHECK-NEXT: %{{.*}} = graph.softmax %{{.*}} {axis = -1 : i64} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  %log_softmax = graph.log_softmax %s {axis = 1 : i64} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  // CHECK-NEXT: %{{.*}} = graph.log_softmax %{{.*}} {axis = 1 : i64} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
  func.return
  // CHECK-NEXT: func.return
}

func.func @attention(%q: tensor<2x4x16x64xf32>, %k: tensor<2x4x?x64xf32>, %v: tensor<2x4x?x32xf32>, %mask: tensor<16x1xi1>) {
  // CHECK-LABEL: func.func @attention(
  %attention = graph.attention %q, %k, %v {scale = 0.125 : f64, is_causal = false} : (tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x32xf32>) -> tensor<2x4x16x32xf32>
  // CHECK-NEXT: %{{.*}} = graph.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64, is_causal = false} : (tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x32xf32>) -> tensor<2x4x16x32xf32>
  %attention_masked = graph.attention %q, %k, %v, %mask {scale = 0.125 : f64, is_causal = false} : (tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x32xf32>, tensor<16x1xi1>) -> tensor<2x4x16x32xf32>
  // CHECK-NEXT: %{{.*}} = graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64, is_causal = false} : (tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x32xf32>, tensor<16x1xi1>) -> tensor<2x4x16x32xf32>
  %attention_causal = graph.attention %q, %q, %q {scale = 0.125 : f64, is_causal = true} : (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>) -> tensor<2x4x16x64xf32>
  // CHECK-NEXT: %{{.*}} = graph.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64, is_causal = true} : (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>) -> tensor<2x4x16x64xf32>
  func.return
  // CHECK-NEXT: func.return
}

func.func @attention_train(%q: tensor<2x4x16x64xf32>, %k: tensor<2x4x?x64xf32>, %mask: tensor<16x?xf32>) {
  // CHECK-LABEL: func.func @attention_train(
  %train:2 = graph.attention_train %q, %k, %k {scale = 0.125 : f64, is_causal = false} : (tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>) -> (tensor<2x4x16x64xf32>, tensor<2x4x16xf32>)
  // CHECK-NEXT: %{{.*}}, %{{.*}} = graph.attention_train %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64, is_causal = false} : (tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>) -> (tensor<2x4x16x64xf32>, tensor<2x4x16xf32>)
  %masked:2 = graph.attention_train %q, %k, %k, %mask {scale = 0.125 : f64, is_causal = true} : (tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<16x?xf32>) -> (tensor<2x4x16x64xf32>, tensor<2x4x16xf32>)
  // CHECK-NEXT: %{{.*}}, %{{.*}} = graph.attention_train %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64, is_causal = true} : (tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<16x?xf32>) -> (tensor<2x4x16x64xf32>, tensor<2x4x16xf32>)
  %grad:3 = graph.attention_grad %train#0, %q, %k, %k, %train#0, %train#1 {scale = 0.125 : f64, is_causal = false} : (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16xf32>) -> (tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>)
  // CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = graph.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64, is_causal = false} : (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16xf32>) -> (tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>)
  %masked_grad:3 = graph.attention_grad %masked#0, %q, %k, %k, %masked#0, %masked#1, %mask {scale = 0.125 : f64, is_causal = true} : (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16xf32>, tensor<16x?xf32>) -> (tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>)
  // CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = graph.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f64, is_causal = true} : (tensor<2x4x16x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x16x64xf32>, tensor<2x4x16xf32>, tensor<16x?xf32>) -> (tensor<2x4x16x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>)
  func.return
  // CHECK-NEXT: func.return
}

func.func @reduce(%x: tensor<2x?x8xf32>) {
  // CHECK-LABEL: func.func @reduce(
  %reduce_max = graph.reduce_max %x {axes = array<i64: 1>, keepdims = false} : (tensor<2x?x8xf32>) -> tensor<2x8xf32>
  // CHECK-NEXT: %{{.*}} = graph.reduce_max %{{.*}} {axes = array<i64: 1>, keepdims = false} : (tensor<2x?x8xf32>) -> tensor<2x8xf32>
  %reduce_mean = graph.reduce_mean %x {axes = array<i64: -1>, keepdims = true} : (tensor<2x?x8xf32>) -> tensor<2x?x1xf32>
  // CHECK-NEXT: %{{.*}} = graph.reduce_mean %{{.*}} {axes = array<i64: -1>, keepdims = true} : (tensor<2x?x8xf32>) -> tensor<2x?x1xf32>
  %reduce_min = graph.reduce_min %x {axes = array<i64: 0, 2>, keepdims = false} : (tensor<2x?x8xf32>) -> tensor<?xf32>
  // CHECK-NEXT: %{{.*}} = graph.reduce_min %{{.*}} {axes = array<i64: 0, 2>, keepdims = false} : (tensor<2x?x8xf32>) -> tensor<?xf32>
  %reduce_prod = graph.reduce_prod %x {axes = array<i64>, keepdims = false} : (tensor<2x?x8xf32>) -> tensor<f32>
  // CHECK-NEXT: %{{.*}} = graph.reduce_prod %{{.*}} {axes = array<i64>, keepdims = false} : (tensor<2x?x8xf32>) -> tensor<f32>
  %reduce_sum = graph.reduce_sum %x {axes = array<i64>, keepdims = true} : (tensor<2x?x8xf32>) -> tensor<1x1x1xf32>
  // CHECK-NEXT: %{{.*}} = graph.reduce_sum %{{.*}} {axes = array<i64>, keepdims = true} : (tensor<2x?x8xf32>) -> tensor<1x1x1xf32>
  %argmax = graph.argmax %x {axis = 2 : i64, keepdims = false} : (tensor<2x?x8xf32>) -> tensor<2x?xi64>
  // CHECK-NEXT: %{{.*}} = graph.argmax %{{.*}} {axis = 2 : i64, keepdims = false} : (tensor<2x?x8xf32>) -> tensor<2x?xi64>
  %argmin = graph.argmin %x {axis = -3 : i64, keepdims = true} : (tensor<2x?x8xf32>) -> tensor<1x?x8xi64>
  // CHECK-NEXT: %{{.*}} = graph.argmin %{{.*}} {axis = -3 : i64, keepdims = true} : (tensor<2x?x8xf32>) -> tensor<1x?x8xi64>
  %topk:2 = graph.topk %x {k = 3 : i64, axis = 2 : i64, largest = true} : (tensor<2x?x8xf32>) -> (tensor<2x?x3xf32>, tensor<2x?x3xi64>)
  // CHECK-NEXT: %{{.*}}, %{{.*}} = graph.topk %{{.*}} {k = 3 : i64, axis = 2 : i64, largest = true} : (tensor<2x?x8xf32>) -> (tensor<2x?x3xf32>, tensor<2x?x3xi64>)
  %cumsum = graph.cumsum %x {axis = 1 : i64, exclusive = false, reverse = true} : (tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
  // CHECK-NEXT: %{{.*}} = graph.cumsum %{{.*}} {axis = 1 : i64, exclusive = false, reverse = true} : (tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
  %cumprod = graph.cumprod %x {axis = -1 : i64, exclusive = true, reverse = false} : (tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
  // CHECK-NEXT: %{{.*}} = graph.cumprod %{{.*}} {axis = -1 : i64, exclusive = true, reverse = false} : (tensor<2x?x8xf32>) -> tensor<2x?x8xf32>
  func.return
  // CHECK-NEXT: func.return
}

func.func @tensor(%x: tensor<4x8xf32>, %y: tensor<4x?xf32>, %i: tensor<3xi64>, %j: tensor<4x2xi32>, %img: tensor<1x3x4x4xf32>, %row: tensor<1x8xf32>, %u: tensor<4x2xf32>) {
  // CHECK-LABEL: func.func @tensor(
  %constant = graph.constant {value = dense<[1, 2, 3]> : tensor<3xi64>} : () -> tensor<3xi64>
  // CHECK-NEXT: %{{.*}} = graph.constant {value = dense<[1, 2, 3]> : tensor<3xi64>} : () -> tensor<3xi64>
  %splat = graph.constant {value = dense<0.5> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  // CHECK-NEXT: %{{.*}} = graph.constant {value = dense<5.000000e-01> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %resource = graph.constant {value = dense_resource<conv1_w> : tensor<64x3x7x7xf32>} : () -> tensor<64x3x7x7xf32>
  // CHECK-NEXT: %{{.*}} = graph.constant {value = dense_resource<conv1_w> : tensor<64x3x7x7xf32>} : () -> tensor<64x3x7x7xf32>
  %reshape = graph.reshape %x : (tensor<4x8xf32>) -> tensor<2x16xf32>
  // CHECK-NEXT: %{{.*}} = graph.reshape %{{.*}} : (tensor<4x8xf32>) -> tensor<2x16xf32>
  %reshape_dyn = graph.reshape %y : (tensor<4x?xf32>) -> tensor<?xf32>
  // CHECK-NEXT: %{{.*}} = graph.reshape %{{.*}} : (tensor<4x?xf32>) -> tensor<?xf32>
  %transpose = graph.transpose %y {permutation = array<i64: 1, 0>} : (tensor<4x?xf32>) -> tensor<?x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.transpose %{{.*}} {permutation = array<i64: 1, 0>} : (tensor<4x?xf32>) -> tensor<?x4xf32>
  %concat = graph.concat %x, %y, %x {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x?xf32>, tensor<4x8xf32>) -> tensor<4x?xf32>
  // CHECK-NEXT: %{{.*}} = graph.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x?xf32>, tensor<4x8xf32>) -> tensor<4x?xf32>
  %concat_one = graph.concat %x {axis = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %{{.*}} = graph.concat %{{.*}} {axis = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %split:3 = graph.split %x {axis = 1 : i64, sizes = array<i64: 2, 2, 4>} : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x4xf32>)
  // CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = graph.split %{{.*}} {axis = 1 : i64, sizes = array<i64: 2, 2, 4>} : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x4xf32>)
  %split_one = graph.split %y {axis = -1 : i64, sizes = array<i64: 5>} : (tensor<4x?xf32>) -> tensor<4x5xf32>
  // CHECK-NEXT: %{{.*}} = graph.split %{{.*}} {axis = -1 : i64, sizes = array<i64: 5>} : (tensor<4x?xf32>) -> tensor<4x5xf32>
  %slice = graph.slice %x {starts = array<i64: 0, 1>, ends = array<i64: 4, 8>, steps = array<i64: 1, 2>} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  // CHECK-NEXT: %{{.*}} = graph.slice %{{.*}} {starts = array<i64: 0, 1>, ends = array<i64: 4, 8>, steps = array<i64: 1, 2>} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  %slice_reverse = graph.slice %x {starts = array<i64: 3, 0>, ends = array<i64: -1, 8>, steps = array<i64: -1, 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %{{.*}} = graph.slice %{{.*}} {starts = array<i64: 3, 0>, ends = array<i64: -1, 8>, steps = array<i64: -1, 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %slice_scatter = graph.slice_scatter %y, %u {starts = array<i64: 0, 1>, ends = array<i64: 4, 5>, steps = array<i64: 1, 2>} : (tensor<4x?xf32>, tensor<4x2xf32>) -> tensor<4x?xf32>
  // CHECK-NEXT: %{{.*}} = graph.slice_scatter %{{.*}}, %{{.*}} {starts = array<i64: 0, 1>, ends = array<i64: 4, 5>, steps = array<i64: 1, 2>} : (tensor<4x?xf32>, tensor<4x2xf32>) -> tensor<4x?xf32>
  %gather = graph.gather %x, %i {axis = 0 : i64} : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<3x8xf32>
  // CHECK-NEXT: %{{.*}} = graph.gather %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<3x8xf32>
  %gather_elements = graph.gather_elements %x, %j {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x2xi32>) -> tensor<4x2xf32>
  // CHECK-NEXT: %{{.*}} = graph.gather_elements %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x2xi32>) -> tensor<4x2xf32>
  %scatter_elements = graph.scatter_elements %x, %j, %u {axis = -1 : i64, reduction = "max"} : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %{{.*}} = graph.scatter_elements %{{.*}}, %{{.*}}, %{{.*}} {axis = -1 : i64, reduction = "max"} : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x8xf32>
  %pad = graph.pad %img {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, mode = "constant", value = 0.0 : f64} : (tensor<1x3x4x4xf32>) -> tensor<1x3x6x6xf32>
  // CHECK-NEXT: %{{.*}} = graph.pad %{{.*}} {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, mode = "constant", value = 0.000000e+00 : f64} : (tensor<1x3x4x4xf32>) -> tensor<1x3x6x6xf32>
  %pad_reflect = graph.pad %y {pads = array<i64: 1, 0, 1, 0>, mode = "reflect", value = 0.0 : f64} : (tensor<4x?xf32>) -> tensor<6x?xf32>
  // CHECK-NEXT: %{{.*}} = graph.pad %{{.*}} {pads = array<i64: 1, 0, 1, 0>, mode = "reflect", value = 0.000000e+00 : f64} : (tensor<4x?xf32>) -> tensor<6x?xf32>
  %pad_wrap = graph.pad %y {pads = array<i64: 5, 0, -1, 0>, mode = "wrap", value = 0.0 : f64} : (tensor<4x?xf32>) -> tensor<8x?xf32>
  // CHECK-NEXT: %{{.*}} = graph.pad %{{.*}} {pads = array<i64: 5, 0, -1, 0>, mode = "wrap", value = 0.000000e+00 : f64} : (tensor<4x?xf32>) -> tensor<8x?xf32>
  %expand = graph.expand %row : (tensor<1x8xf32>) -> tensor<2x3x8xf32>
  // CHECK-NEXT: %{{.*}} = graph.expand %{{.*}} : (tensor<1x8xf32>) -> tensor<2x3x8xf32>
  %tile = graph.tile %y {repeats = array<i64: 2, 3>} : (tensor<4x?xf32>) -> tensor<8x?xf32>
  // CHECK-NEXT: %{{.*}} = graph.tile %{{.*}} {repeats = array<i64: 2, 3>} : (tensor<4x?xf32>) -> tensor<8x?xf32>
  %iota = graph.iota %y {axis = 1 : i64} : (tensor<4x?xf32>) -> tensor<?xi64>
  // CHECK-NEXT: %{{.*}} = graph.iota %{{.*}} {axis = 1 : i64} : (tensor<4x?xf32>) -> tensor<?xi64>
  func.return
  // CHECK-NEXT: func.return
}

func.func @recurrent(%x: tensor<?x2x16xf32>, %w4: tensor<128x16xf32>, %r4: tensor<128x32xf32>, %b4: tensor<128xf32>, %w3: tensor<96x16xf32>, %r3: tensor<96x32xf32>, %b3: tensor<96xf32>, %w1: tensor<32x16xf32>, %r1: tensor<32x32xf32>, %b1: tensor<32xf32>, %h: tensor<2x32xf32>, %p: tensor<96xf32>) {
  // CHECK-LABEL: func.func @recurrent(
  %lstm:3 = graph.lstm %x, %w4, %r4, %b4, %b4, %h, %h {reverse = false, input_forget = false} : (tensor<?x2x16xf32>, tensor<128x16xf32>, tensor<128x32xf32>, tensor<128xf32>, tensor<128xf32>, tensor<2x32xf32>, tensor<2x32xf32>) -> (tensor<?x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>)
  // CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = graph.lstm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {reverse = false, input_forget = false} : (tensor<?x2x16xf32>, tensor<128x16xf32>, tensor<128x32xf32>, tensor<128xf32>, tensor<128xf32>, tensor<2x32xf32>, tensor<2x32xf32>) -> (tensor<?x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>)
  %peephole:3 = graph.lstm %x, %w4, %r4, %b4, %b4, %h, %h, %p {reverse = true, clip = 3.0 : f64, input_forget = true} : (tensor<?x2x16xf32>, tensor<128x16xf32>, tensor<128x32xf32>, tensor<128xf32>, tensor<128xf32>, tensor<2x32xf32>, tensor<2x32xf32>, tensor<96xf32>) -> (tensor<?x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>)
  // CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = graph.lstm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {reverse = true, clip = 3.000000e+00 : f64, input_forget = true} : (tensor<?x2x16xf32>, tensor<128x16xf32>, tensor<128x32xf32>, tensor<128xf32>, tensor<128xf32>, tensor<2x32xf32>, tensor<2x32xf32>, tensor<96xf32>) -> (tensor<?x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>)
  %train:4 = graph.lstm_train %x, %w4, %r4, %b4, %b4, %h, %h {reverse = false} : (tensor<?x2x16xf32>, tensor<128x16xf32>, tensor<128x32xf32>, tensor<128xf32>, tensor<128xf32>, tensor<2x32xf32>, tensor<2x32xf32>) -> (tensor<?x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>, tensor<28672xui8>)
  // CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = graph.lstm_train %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {reverse = false} : (tensor<?x2x16xf32>, tensor<128x16xf32>, tensor<128x32xf32>, tensor<128xf32>, tensor<128xf32>, tensor<2x32xf32>, tensor<2x32xf32>) -> (tensor<?x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>, tensor<28672xui8>)
  %lstm_grad:6 = graph.lstm_grad %x, %w4, %r4, %b4, %b4, %h, %h, %train#0, %train#1, %train#2, %train#0, %train#1, %train#2, %train#3 {reverse = true} : (tensor<?x2x16xf32>, tensor<128x16xf32>, tensor<128x32xf32>, tensor<128xf32>, tensor<128xf32>, tensor<2x32xf32>, tensor<2x32xf32>, tensor<?x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>, tensor<?x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>, tensor<28672xui8>) -> (tensor<?x2x16xf32>, tensor<128x16xf32>, tensor<128x32xf32>, tensor<128xf32>, tensor<2x32xf32>, tensor<2x32xf32>)
  // CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = graph.lstm_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {reverse = true} : (tensor<?x2x16xf32>, tensor<128x16xf32>, tensor<128x32xf32>, tensor<128xf32>, tensor<128xf32>, tensor<2x32xf32>, tensor<2x32xf32>, tensor<?x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>, tensor<?x2x32xf32>, tensor<2x32xf32>, tensor<2x32xf32>, tensor<28672xui8>) -> (tensor<?x2x16xf32>, tensor<128x16xf32>, tensor<128x32xf32>, tensor<128xf32>, tensor<2x32xf32>, tensor<2x32xf32>)
  %gru:2 = graph.gru %x, %w3, %r3, %b3, %b3, %h {reverse = true, linear_before_reset = false} : (tensor<?x2x16xf32>, tensor<96x16xf32>, tensor<96x32xf32>, tensor<96xf32>, tensor<96xf32>, tensor<2x32xf32>) -> (tensor<?x2x32xf32>, tensor<2x32xf32>)
  // CHECK-NEXT: %{{.*}}, %{{.*}} = graph.gru %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {reverse = true, linear_before_reset = false} : (tensor<?x2x16xf32>, tensor<96x16xf32>, tensor<96x32xf32>, tensor<96xf32>, tensor<96xf32>, tensor<2x32xf32>) -> (tensor<?x2x32xf32>, tensor<2x32xf32>)
  %rnn:2 = graph.rnn %x, %w1, %r1, %b1, %b1, %h {reverse = false, clip = 1.5 : f64, nonlinearity = "relu"} : (tensor<?x2x16xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<2x32xf32>) -> (tensor<?x2x32xf32>, tensor<2x32xf32>)
  // CHECK-NEXT: %{{.*}}, %{{.*}} = graph.rnn %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {reverse = false, clip = 1.500000e+00 : f64, nonlinearity = "relu"} : (tensor<?x2x16xf32>, tensor<32x16xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<2x32xf32>) -> (tensor<?x2x32xf32>, tensor<2x32xf32>)
  func.return
  // CHECK-NEXT: func.return
}

func.func @embedding(%table: tensor<1000x64xf32>, %ids: tensor<2x16xi64>, %flat: tensor<640xi64>, %offsets: tensor<32xi32>, %weights: tensor<640xf32>) {
  // CHECK-LABEL: func.func @embedding(
  %embedding = graph.embedding %table, %ids : (tensor<1000x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
  // CHECK-NEXT: %{{.*}} = graph.embedding %{{.*}}, %{{.*}} : (tensor<1000x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
  %embedding_bag = graph.embedding_bag %table, %flat, %offsets {mode = "mean", include_last_offset = false} : (tensor<1000x64xf32>, tensor<640xi64>, tensor<32xi32>) -> tensor<32x64xf32>
  // CHECK-NEXT: %{{.*}} = graph.embedding_bag %{{.*}}, %{{.*}}, %{{.*}} {mode = "mean", include_last_offset = false} : (tensor<1000x64xf32>, tensor<640xi64>, tensor<32xi32>) -> tensor<32x64xf32>
  %embedding_bag_weighted = graph.embedding_bag %table, %flat, %offsets, %weights {mode = "sum", include_last_offset = true} : (tensor<1000x64xf32>, tensor<640xi64>, tensor<32xi32>, tensor<640xf32>) -> tensor<31x64xf32>
  // CHECK-NEXT: %{{.*}} = graph.embedding_bag %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {mode = "sum", include_last_offset = true} : (tensor<1000x64xf32>, tensor<640xi64>, tensor<32xi32>, tensor<640xf32>) -> tensor<31x64xf32>
  func.return
  // CHECK-NEXT: func.return
}

func.func @grad(%x: tensor<8x16x32x32xf32>, %dy: tensor<8x32x32x32xf32>, %dp: tensor<8x16x16x16xf32>, %dg: tensor<4x8x16xf32>, %xg: tensor<4x8x17xf32>, %bags: tensor<32x64xf32>, %ids: tensor<640xi64>, %offsets: tensor<33xi64>, %w: tensor<640xf32>, %lr_t: tensor<f32>) {
  // CHECK-LABEL: func.func @grad(
  %conv_weight_grad = graph.conv_weight_grad %x, %dy {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<8x16x32x32xf32>, tensor<8x32x32x32xf32>) -> tensor<32x16x3x3xf32>
  // CHECK-NEXT: %{{.*}} = graph.conv_weight_grad %{{.*}}, %{{.*}} {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<8x16x32x32xf32>, tensor<8x32x32x32xf32>) -> tensor<32x16x3x3xf32>
  %conv_weight_grad_grouped = graph.conv_weight_grad %xg, %dg {kernel = array<i64: 3>, strides = array<i64: 1>, pads = array<i64: 0, 1>, dilations = array<i64: 1>, groups = 8 : i64} : (tensor<4x8x17xf32>, tensor<4x8x16xf32>) -> tensor<8x1x3xf32>
  // CHECK-NEXT: %{{.*}} = graph.conv_weight_grad %{{.*}}, %{{.*}} {kernel = array<i64: 3>, strides = array<i64: 1>, pads = array<i64: 0, 1>, dilations = array<i64: 1>, groups = 8 : i64} : (tensor<4x8x17xf32>, tensor<4x8x16xf32>) -> tensor<8x1x3xf32>
  %max_pool_grad = graph.max_pool_grad %dp, %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<8x16x16x16xf32>, tensor<8x16x32x32xf32>) -> tensor<8x16x32x32xf32>
  // CHECK-NEXT: %{{.*}} = graph.max_pool_grad %{{.*}}, %{{.*}} {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<8x16x16x16xf32>, tensor<8x16x32x32xf32>) -> tensor<8x16x32x32xf32>
  %avg_pool_grad = graph.avg_pool_grad %dp, %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, ceil_mode = true, count_include_pad = true} : (tensor<8x16x16x16xf32>, tensor<8x16x32x32xf32>) -> tensor<8x16x32x32xf32>
  // CHECK-NEXT: %{{.*}} = graph.avg_pool_grad %{{.*}}, %{{.*}} {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, ceil_mode = true, count_include_pad = true} : (tensor<8x16x16x16xf32>, tensor<8x16x32x32xf32>) -> tensor<8x16x32x32xf32>
  %embedding_bag_grad = graph.embedding_bag_grad %bags, %ids, %offsets {mode = "mean", rows = 1000 : i64} : (tensor<32x64xf32>, tensor<640xi64>, tensor<33xi64>) -> tensor<1000x64xf32>
  // CHECK-NEXT: %{{.*}} = graph.embedding_bag_grad %{{.*}}, %{{.*}}, %{{.*}} {mode = "mean", rows = 1000 : i64} : (tensor<32x64xf32>, tensor<640xi64>, tensor<33xi64>) -> tensor<1000x64xf32>
  %embedding_bag_grad_weighted = graph.embedding_bag_grad %bags, %ids, %offsets, %w {mode = "sum", rows = 1000 : i64} : (tensor<32x64xf32>, tensor<640xi64>, tensor<33xi64>, tensor<640xf32>) -> tensor<1000x64xf32>
  // CHECK-NEXT: %{{.*}} = graph.embedding_bag_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {mode = "sum", rows = 1000 : i64} : (tensor<32x64xf32>, tensor<640xi64>, tensor<33xi64>, tensor<640xf32>) -> tensor<1000x64xf32>
  %embedding_bag_update = graph.embedding_bag_update %embedding_bag_grad, %bags, %ids, %offsets {mode = "mean", scale = -1.000000e-02 : f64} : (tensor<1000x64xf32>, tensor<32x64xf32>, tensor<640xi64>, tensor<33xi64>) -> tensor<1000x64xf32>
  // CHECK-NEXT: %{{.*}} = graph.embedding_bag_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {mode = "mean", scale = -1.000000e-02 : f64} : (tensor<1000x64xf32>, tensor<32x64xf32>, tensor<640xi64>, tensor<33xi64>) -> tensor<1000x64xf32>
  %adam_table, %adam_m, %adam_v = graph.embedding_bag_adam_update %embedding_bag_update, %embedding_bag_grad, %embedding_bag_grad_weighted, %bags, %ids, %offsets, %lr_t {mode = "mean", beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64} : (tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<32x64xf32>, tensor<640xi64>, tensor<33xi64>, tensor<f32>) -> (tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<1000x64xf32>)
  // CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = graph.embedding_bag_adam_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {mode = "mean", beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64} : (tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<32x64xf32>, tensor<640xi64>, tensor<33xi64>, tensor<f32>) -> (tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<1000x64xf32>)
  %adam_weighted:3 = graph.embedding_bag_adam_update %adam_table, %adam_m, %adam_v, %bags, %ids, %offsets, %lr_t, %w {mode = "sum", beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64} : (tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<32x64xf32>, tensor<640xi64>, tensor<33xi64>, tensor<f32>, tensor<640xf32>) -> (tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<1000x64xf32>)
  // CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = graph.embedding_bag_adam_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {mode = "sum", beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64} : (tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<32x64xf32>, tensor<640xi64>, tensor<33xi64>, tensor<f32>, tensor<640xf32>) -> (tensor<1000x64xf32>, tensor<1000x64xf32>, tensor<1000x64xf32>)
  func.return
  // CHECK-NEXT: func.return
}

// Control flow: regions that end in graph.yield and read outer values directly.

// CHECK-LABEL: func.func @control_flow(
func.func @control_flow(%x: tensor<2x8xf32>, %p: tensor<i1>) -> (tensor<2x8xf32>, tensor<i64>) {
  %y = graph.if %p : tensor<i1> -> (tensor<2x8xf32>) {
    %r = graph.relu %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
    graph.yield %r : tensor<2x8xf32>
  } else {
    graph.yield %x : tensor<2x8xf32>
  }
  // CHECK:      %{{.*}} = graph.if %{{.*}} : tensor<i1> -> (tensor<2x8xf32>) {
  // CHECK-NEXT:   %{{.*}} = graph.relu %{{.*}} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK-NEXT:   graph.yield %{{.*}} : tensor<2x8xf32>
  // CHECK-NEXT: } else {
  // CHECK-NEXT:   graph.yield %{{.*}} : tensor<2x8xf32>
  // CHECK-NEXT: }
  %zero = graph.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %n, %h = graph.while (%zero, %y) : (tensor<i64>, tensor<2x8xf32>) -> (tensor<i64>, tensor<2x8xf32>) {max_trips = 4 : i64} cond {
  ^bb0(%i: tensor<i64>, %a: tensor<2x8xf32>):
    %four = graph.constant {value = dense<4> : tensor<i64>} : () -> tensor<i64>
    %go = graph.lt %i, %four : (tensor<i64>, tensor<i64>) -> tensor<i1>
    graph.yield %go : tensor<i1>
  } do {
  ^bb0(%j: tensor<i64>, %b: tensor<2x8xf32>):
    %one = graph.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %next = graph.add %j, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %t = graph.tanh %b : (tensor<2x8xf32>) -> tensor<2x8xf32>
    graph.yield %next, %t : tensor<i64>, tensor<2x8xf32>
  }
  // CHECK:      %{{.*}}, %{{.*}} = graph.while (%{{.*}}, %{{.*}}) : (tensor<i64>, tensor<2x8xf32>) -> (tensor<i64>, tensor<2x8xf32>) {max_trips = 4 : i64} cond {
  // CHECK-NEXT: ^{{.*}}(%{{.*}}: tensor<i64>, %{{.*}}: tensor<2x8xf32>):
  // CHECK:        graph.yield %{{.*}} : tensor<i1>
  // CHECK-NEXT: } do {
  // CHECK:        graph.yield %{{.*}}, %{{.*}} : tensor<i64>, tensor<2x8xf32>
  // CHECK-NEXT: }
  func.return %h, %n : tensor<2x8xf32>, tensor<i64>
}
