// RUN: not gnomon-opt %s --split-input-file --allow-unregistered-dialect -p torch-to-graph --print-debuginfo 2>&1 | filecheck %s

// A small network as torch-mlir prints it (generic form, value tensors, module paths as locations)
// becomes graph ops at the same locations; the torch constants and lists they read are gone, and
// the signature uses builtin tensors. The second input fails, so gnomon-opt exits with status 2.

"func.func"() <{function_type = (!torch.vtensor<[1,3,8,8],f32>, !torch.vtensor<[5,16],f32>, !torch.vtensor<[5],f32>) -> !torch.vtensor<[1,5],f32>, sym_name = "main"}> ({
^bb0(%arg0: !torch.vtensor<[1,3,8,8],f32>, %arg1: !torch.vtensor<[5,16],f32>, %arg2: !torch.vtensor<[5],f32>):
  %0 = "torch.vtensor.literal"() <{value = dense_resource<conv_weight> : tensor<4x3x3x3xf32>}> : () -> !torch.vtensor<[4,3,3,3],f32> loc("conv")
  %1 = "torch.vtensor.literal"() <{value = dense<0.000000e+00> : tensor<4xf32>}> : () -> !torch.vtensor<[4],f32> loc("conv")
  %2 = "torch.constant.int"() <{value = 1 : i64}> : () -> !torch.int loc("conv")
  %3 = "torch.prim.ListConstruct"(%2, %2) : (!torch.int, !torch.int) -> !torch.list<int> loc("conv")
  %4 = "torch.constant.int"() <{value = 0 : i64}> : () -> !torch.int loc("conv")
  %5 = "torch.prim.ListConstruct"(%4, %4) : (!torch.int, !torch.int) -> !torch.list<int> loc("conv")
  %6 = "torch.constant.bool"() <{value = false}> : () -> !torch.bool loc("conv")
  %7 = "torch.aten.convolution"(%arg0, %0, %1, %3, %3, %3, %6, %5, %2) : (!torch.vtensor<[1,3,8,8],f32>, !torch.vtensor<[4,3,3,3],f32>, !torch.vtensor<[4],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int) -> !torch.vtensor<[1,4,8,8],f32> loc("conv")
  %8 = "torch.vtensor.literal"() <{value = dense<1.000000e+00> : tensor<4xf32>}> : () -> !torch.vtensor<[4],f32> loc("bn")
  %9 = "torch.constant.float"() <{value = 1.000000e-01 : f64}> : () -> !torch.float loc("bn")
  %10 = "torch.constant.float"() <{value = 1.000000e-05 : f64}> : () -> !torch.float loc("bn")
  %11 = "torch.aten.batch_norm"(%7, %8, %1, %1, %8, %6, %9, %10, %6) : (!torch.vtensor<[1,4,8,8],f32>, !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>, !torch.bool, !torch.float, !torch.float, !torch.bool) -> !torch.vtensor<[1,4,8,8],f32> loc("bn")
  %12 = "torch.aten.relu"(%11) : (!torch.vtensor<[1,4,8,8],f32>) -> !torch.vtensor<[1,4,8,8],f32> loc("act")
  %13 = "torch.constant.int"() <{value = 2 : i64}> : () -> !torch.int loc("pool")
  %14 = "torch.prim.ListConstruct"(%13, %13) : (!torch.int, !torch.int) -> !torch.list<int> loc("pool")
  %15 = "torch.prim.ListConstruct"() : () -> !torch.list<int> loc("pool")
  %16 = "torch.aten.max_pool2d"(%12, %14, %15, %5, %3, %6) : (!torch.vtensor<[1,4,8,8],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool) -> !torch.vtensor<[1,4,4,4],f32> loc("pool")
  %17 = "torch.constant.bool"() <{value = true}> : () -> !torch.bool loc("avgpool")
  %18 = "torch.constant.none"() : () -> !torch.none loc("avgpool")
  %19 = "torch.aten.avg_pool2d"(%16, %14, %14, %5, %6, %17, %18) : (!torch.vtensor<[1,4,4,4],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.bool, !torch.none) -> !torch.vtensor<[1,4,2,2],f32> loc("avgpool")
  %20 = "torch.constant.int"() <{value = 16 : i64}> : () -> !torch.int loc("flatten")
  %21 = "torch.prim.ListConstruct"(%2, %20) : (!torch.int, !torch.int) -> !torch.list<int> loc("flatten")
  %22 = "torch.aten.reshape"(%19, %21) : (!torch.vtensor<[1,4,2,2],f32>, !torch.list<int>) -> !torch.vtensor<[1,16],f32> loc("flatten")
  %23 = "torch.aten.transpose.int"(%arg1, %4, %2) : (!torch.vtensor<[5,16],f32>, !torch.int, !torch.int) -> !torch.vtensor<[16,5],f32> loc("fc")
  %24 = "torch.aten.mm"(%22, %23) : (!torch.vtensor<[1,16],f32>, !torch.vtensor<[16,5],f32>) -> !torch.vtensor<[1,5],f32> loc("fc")
  %25 = "torch.aten.add.Tensor"(%24, %arg2, %2) : (!torch.vtensor<[1,5],f32>, !torch.vtensor<[5],f32>, !torch.int) -> !torch.vtensor<[1,5],f32> loc("fc")
  %26 = "torch.aten.softmax.int"(%25, %2, %18) : (!torch.vtensor<[1,5],f32>, !torch.int, !torch.none) -> !torch.vtensor<[1,5],f32> loc("softmax")
  "func.return"(%26) : (!torch.vtensor<[1,5],f32>) -> ()
}) : () -> ()

// CHECK-LABEL: func.func @main(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<1x3x8x8xf32> loc(unknown), %[[FC_W:[^:]*]]: tensor<5x16xf32> loc(unknown), %[[FC_B:[^:]*]]: tensor<5xf32> loc(unknown)) -> tensor<1x5xf32> {
// CHECK-NEXT:    %[[W:.*]] = graph.constant {value = dense_resource<conv_weight> : tensor<4x3x3x3xf32>} : () -> tensor<4x3x3x3xf32> loc("conv")
// CHECK-NEXT:    %[[ZEROS:.*]] = graph.constant {value = dense<0.000000e+00> : tensor<4xf32>} : () -> tensor<4xf32> loc("conv")
// CHECK-NEXT:    %[[CONV:.*]] = graph.conv %[[X]], %[[W]], %[[ZEROS]] {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32> loc("conv")
// CHECK-NEXT:    %[[ONES:.*]] = graph.constant {value = dense<1.000000e+00> : tensor<4xf32>} : () -> tensor<4xf32> loc("bn")
// CHECK-NEXT:    %[[BN:.*]] = graph.batch_norm %[[CONV]], %[[ONES]], %[[ZEROS]], %[[ZEROS]], %[[ONES]] {epsilon = 1.000000e-05 : f64} : (tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32> loc("bn")
// CHECK-NEXT:    %[[RELU:.*]] = graph.relu %[[BN]] : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> loc("act")
// CHECK-NEXT:    %[[MAX:.*]] = graph.max_pool %[[RELU]] {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32> loc("pool")
// CHECK-NEXT:    %[[AVG:.*]] = graph.avg_pool %[[MAX]] {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = true} : (tensor<1x4x4x4xf32>) -> tensor<1x4x2x2xf32> loc("avgpool")
// CHECK-NEXT:    %[[FLAT:.*]] = graph.reshape %[[AVG]] : (tensor<1x4x2x2xf32>) -> tensor<1x16xf32> loc("flatten")
// CHECK-NEXT:    %[[WT:.*]] = graph.transpose %[[FC_W]] {permutation = array<i64: 1, 0>} : (tensor<5x16xf32>) -> tensor<16x5xf32> loc("fc")
// CHECK-NEXT:    %[[MM:.*]] = graph.matmul %[[FLAT]], %[[WT]] : (tensor<1x16xf32>, tensor<16x5xf32>) -> tensor<1x5xf32> loc("fc")
// CHECK-NEXT:    %[[ADD:.*]] = graph.add %[[MM]], %[[FC_B]] : (tensor<1x5xf32>, tensor<5xf32>) -> tensor<1x5xf32> loc("fc")
// CHECK-NEXT:    %[[SOFTMAX:.*]] = graph.softmax %[[ADD]] {axis = 1 : i64} : (tensor<1x5xf32>) -> tensor<1x5xf32> loc("softmax")
// CHECK-NEXT:    func.return %[[SOFTMAX]] : tensor<1x5xf32>
// CHECK-NOT:     torch.

// -----

// einsum composes graph ops: an attention score is a transpose and a batched matmul; a diagonal is a gather of
// the flattened pair of dims at multiples of n + 1.

"func.func"() <{function_type = (!torch.vtensor<[2,3,4,5],f32>, !torch.vtensor<[2,3,6,5],f32>, !torch.vtensor<[3,5,5],f64>) -> (!torch.vtensor<[2,3,4,6],f32>, !torch.vtensor<[3,5],f64>), sym_name = "einsum"}> ({
^bb0(%arg0: !torch.vtensor<[2,3,4,5],f32>, %arg1: !torch.vtensor<[2,3,6,5],f32>, %arg2: !torch.vtensor<[3,5,5],f64>):
  %0 = "torch.constant.str"() <{value = "bhqd,bhkd->bhqk"}> : () -> !torch.str loc("scores")
  %1 = "torch.prim.ListConstruct"(%arg0, %arg1) : (!torch.vtensor<[2,3,4,5],f32>, !torch.vtensor<[2,3,6,5],f32>) -> !torch.list<vtensor> loc("scores")
  %2 = "torch.constant.none"() : () -> !torch.none loc("scores")
  %3 = "torch.aten.einsum"(%0, %1, %2) : (!torch.str, !torch.list<vtensor>, !torch.none) -> !torch.vtensor<[2,3,4,6],f32> loc("scores")
  %4 = "torch.constant.str"() <{value = "...ii ->...i"}> : () -> !torch.str loc("diagonal")
  %5 = "torch.prim.ListConstruct"(%arg2) : (!torch.vtensor<[3,5,5],f64>) -> !torch.list<vtensor> loc("diagonal")
  %6 = "torch.aten.einsum"(%4, %5, %2) : (!torch.str, !torch.list<vtensor>, !torch.none) -> !torch.vtensor<[3,5],f64> loc("diagonal")
  "func.return"(%3, %6) : (!torch.vtensor<[2,3,4,6],f32>, !torch.vtensor<[3,5],f64>) -> ()
}) : () -> ()

// CHECK-LABEL: func.func @einsum(
// CHECK-SAME:      %[[Q:[^:]*]]: tensor<2x3x4x5xf32> loc(unknown), %[[K:[^:]*]]: tensor<2x3x6x5xf32> loc(unknown), %[[X:[^:]*]]: tensor<3x5x5xf64> loc(unknown))
// CHECK-NEXT:    %[[KT:.*]] = graph.transpose %[[K]] {permutation = array<i64: 0, 1, 3, 2>} : (tensor<2x3x6x5xf32>) -> tensor<2x3x5x6xf32> loc("scores")
// CHECK-NEXT:    %[[S:.*]] = graph.matmul %[[Q]], %[[KT]] : (tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x4x6xf32> loc("scores")
// CHECK-NEXT:    %[[FLAT:.*]] = graph.reshape %[[X]] : (tensor<3x5x5xf64>) -> tensor<3x25xf64> loc("diagonal")
// CHECK-NEXT:    %[[AT:.*]] = graph.constant {value = dense<[0, 6, 12, 18, 24]> : tensor<5xi64>} : () -> tensor<5xi64> loc("diagonal")
// CHECK-NEXT:    %[[D:.*]] = graph.gather %[[FLAT]], %[[AT]] {axis = 1 : i64} : (tensor<3x25xf64>, tensor<5xi64>) -> tensor<3x5xf64> loc("diagonal")
// CHECK-NEXT:    func.return %[[S]], %[[D]] : tensor<2x3x4x6xf32>, tensor<3x5xf64>
// An ONNX op's regions (FlexAttention's prob_mod and score_mod subgraphs) are converted before the op, their
// arguments moved to builtin tensors; the op's converter inlines them: score_mod's tanh sits between the scores
// and the softmax, at its own node's location, and the identity prob_mod leaves nothing.

"func.func"() <{function_type = (!torch.vtensor<[1,1,2,4],f32>, !torch.vtensor<[1,1,3,4],f32>, !torch.vtensor<[1,1,3,4],f32>) -> !torch.vtensor<[1,1,2,4],f32>, sym_name = "flex"}> ({
^bb0(%arg0: !torch.vtensor<[1,1,2,4],f32>, %arg1: !torch.vtensor<[1,1,3,4],f32>, %arg2: !torch.vtensor<[1,1,3,4],f32>):
  %0 = "torch.operator"(%arg0, %arg1, %arg2) <{name = "ai.onnx.preview.FlexAttention"}> ({
  ^bb0(%arg3: !torch.vtensor<[1,1,2,3],f32>):
    "torch.operator_terminator"(%arg3) : (!torch.vtensor<[1,1,2,3],f32>) -> ()
  }, {
  ^bb0(%arg4: !torch.vtensor<[1,1,2,3],f32>):
    %1 = "torch.aten.tanh"(%arg4) : (!torch.vtensor<[1,1,2,3],f32>) -> !torch.vtensor<[1,1,2,3],f32> loc("score_tanh")
    "torch.operator_terminator"(%1) : (!torch.vtensor<[1,1,2,3],f32>) -> ()
  }) {torch.onnx.scale = 2.500000e-01 : f32} : (!torch.vtensor<[1,1,2,4],f32>, !torch.vtensor<[1,1,3,4],f32>, !torch.vtensor<[1,1,3,4],f32>) -> !torch.vtensor<[1,1,2,4],f32> loc("flex")
  "func.return"(%0) : (!torch.vtensor<[1,1,2,4],f32>) -> ()
}) : () -> ()

// CHECK-LABEL: func.func @flex(
// CHECK:         %[[SCORES:.*]] = graph.matmul %{{.*}}, %{{.*}} : (tensor<1x1x2x4xf32>, tensor<1x1x4x3xf32>) -> tensor<1x1x2x3xf32> loc("flex")
// CHECK-NEXT:    %[[TANH:.*]] = graph.tanh %[[SCORES]] : (tensor<1x1x2x3xf32>) -> tensor<1x1x2x3xf32> loc("score_tanh")
// CHECK-NEXT:    %[[PROBABILITIES:.*]] = graph.softmax %[[TANH]] {axis = -1 : i64} : (tensor<1x1x2x3xf32>) -> tensor<1x1x2x3xf32> loc("flex")
// CHECK-NEXT:    %[[Y:.*]] = graph.matmul %[[PROBABILITIES]], %{{.*}} : (tensor<1x1x2x3xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x2x4xf32> loc("flex")
// CHECK-NEXT:    func.return %[[Y]] : tensor<1x1x2x4xf32>
// CHECK-NOT:     torch.

// -----

// An LSTM layer's oneDNN training kernels, as the torch frontend leaves them in a joint graph, become
// graph.lstm_train and graph.lstm_grad over (batch, hidden) states; an absent final-state gradient is zeros, and
// both biases get the one bias gradient.

"func.func"() <{function_type = (!torch.vtensor<[3,2,4],f32>, !torch.vtensor<[8,4],f32>, !torch.vtensor<[8,2],f32>, !torch.vtensor<[8],f32>, !torch.vtensor<[1,2,2],f32>, !torch.vtensor<[3,2,2],f32>) -> (!torch.vtensor<[3,2,4],f32>, !torch.vtensor<[8,4],f32>, !torch.vtensor<[8],f32>, !torch.vtensor<[8],f32>, !torch.vtensor<[1,2,2],f32>), sym_name = "lstm_layer"}> ({
^bb0(%x: !torch.vtensor<[3,2,4],f32>, %w_ih: !torch.vtensor<[8,4],f32>, %w_hh: !torch.vtensor<[8,2],f32>, %b: !torch.vtensor<[8],f32>, %h: !torch.vtensor<[1,2,2],f32>, %dy: !torch.vtensor<[3,2,2],f32>):
  %false = "torch.constant.bool"() <{value = false}> : () -> !torch.bool
  %true = "torch.constant.bool"() <{value = true}> : () -> !torch.bool
  %none = "torch.constant.none"() : () -> !torch.none
  %one = "torch.constant.int"() <{value = 1 : i64}> : () -> !torch.int
  %two = "torch.constant.int"() <{value = 2 : i64}> : () -> !torch.int
  %sizes = "torch.prim.ListConstruct"() : () -> !torch.list<int>
  %0:4 = "torch.operator"(%x, %w_ih, %w_hh, %b, %b, %h, %h, %false, %sizes, %two, %two, %one, %true, %false, %false, %true) <{name = "torch.aten.mkldnn_rnn_layer"}> : (!torch.vtensor<[3,2,4],f32>, !torch.vtensor<[8,4],f32>, !torch.vtensor<[8,2],f32>, !torch.vtensor<[8],f32>, !torch.vtensor<[8],f32>, !torch.vtensor<[1,2,2],f32>, !torch.vtensor<[1,2,2],f32>, !torch.bool, !torch.list<int>, !torch.int, !torch.int, !torch.int, !torch.bool, !torch.bool, !torch.bool, !torch.bool) -> (!torch.vtensor<[3,2,2],f32>, !torch.vtensor<[1,2,2],f32>, !torch.vtensor<[1,2,2],f32>, !torch.vtensor<[28672],ui8>) loc("lstm")
  %1:7 = "torch.operator"(%x, %w_ih, %w_hh, %b, %b, %h, %h, %0#0, %0#1, %0#2, %dy, %none, %none, %false, %two, %two, %one, %true, %true, %false, %sizes, %false, %0#3) <{name = "torch.aten.mkldnn_rnn_layer_backward"}> : (!torch.vtensor<[3,2,4],f32>, !torch.vtensor<[8,4],f32>, !torch.vtensor<[8,2],f32>, !torch.vtensor<[8],f32>, !torch.vtensor<[8],f32>, !torch.vtensor<[1,2,2],f32>, !torch.vtensor<[1,2,2],f32>, !torch.vtensor<[3,2,2],f32>, !torch.vtensor<[1,2,2],f32>, !torch.vtensor<[1,2,2],f32>, !torch.vtensor<[3,2,2],f32>, !torch.none, !torch.none, !torch.bool, !torch.int, !torch.int, !torch.int, !torch.bool, !torch.bool, !torch.bool, !torch.list<int>, !torch.bool, !torch.vtensor<[28672],ui8>) -> (!torch.vtensor<[3,2,4],f32>, !torch.vtensor<[8,4],f32>, !torch.vtensor<[8,2],f32>, !torch.vtensor<[8],f32>, !torch.vtensor<[8],f32>, !torch.vtensor<[1,2,2],f32>, !torch.vtensor<[1,2,2],f32>) loc("backward.lstm")
  "func.return"(%1#0, %1#1, %1#3, %1#4, %1#5) : (!torch.vtensor<[3,2,4],f32>, !torch.vtensor<[8,4],f32>, !torch.vtensor<[8],f32>, !torch.vtensor<[8],f32>, !torch.vtensor<[1,2,2],f32>) -> ()
}) : () -> ()

// CHECK-LABEL: func.func @lstm_layer(
// CHECK:         %[[H:.*]] = graph.reshape %h : (tensor<1x2x2xf32>) -> tensor<2x2xf32> loc("lstm")
// CHECK-NEXT:    %[[C:.*]] = graph.reshape %h : (tensor<1x2x2xf32>) -> tensor<2x2xf32> loc("lstm")
// CHECK-NEXT:    %[[Y:.*]], %{{.*}}, %{{.*}}, %[[WS:.*]] = graph.lstm_train %x, %w_ih, %w_hh, %b, %b, %[[H]], %[[C]] {reverse = false} : ({{.*}}) -> (tensor<3x2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<28672xui8>) loc("lstm")
// CHECK:         %[[DHN:.*]] = graph.constant {value = dense<0.000000e+00> : tensor<2x2xf32>} : () -> tensor<2x2xf32> loc("backward.lstm")
// CHECK-NEXT:    %[[DCN:.*]] = graph.constant {value = dense<0.000000e+00> : tensor<2x2xf32>} : () -> tensor<2x2xf32> loc("backward.lstm")
// CHECK-NEXT:    %[[DX:.*]], %[[DW:.*]], %{{.*}}, %[[DB:.*]], %[[DH:.*]], %{{.*}} = graph.lstm_grad %x, %w_ih, %w_hh, %b, %b, %{{.*}}, %{{.*}}, %[[Y]], %{{.*}}, %{{.*}}, %dy, %[[DHN]], %[[DCN]], %[[WS]] {reverse = false} : ({{.*}}) -> (tensor<3x2x4xf32>, tensor<8x4xf32>, tensor<8x2xf32>, tensor<8xf32>, tensor<2x2xf32>, tensor<2x2xf32>) loc("backward.lstm")
// CHECK-NEXT:    %[[DH1:.*]] = graph.reshape %[[DH]] : (tensor<2x2xf32>) -> tensor<1x2x2xf32> loc("backward.lstm")
// CHECK:         func.return %[[DX]], %[[DW]], %[[DB]], %[[DB]], %[[DH1]] : tensor<3x2x4xf32>, tensor<8x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<1x2x2xf32>

// -----

// Ops without a converter are all reported, each with the node it came from, and nothing is printed.

"func.func"() <{function_type = (!torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32>, sym_name = "unsupported"}> ({
^bb0(%arg0: !torch.vtensor<[2,3],f32>):
  %0 = "torch.aten.foo"(%arg0) : (!torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> loc("bar")
  %1 = "torch.aten.relu"(%0) : (!torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> loc("act")
  %2 = "torch.aten.baz"(%1) : (!torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> loc("qux")
  "func.return"(%2) : (!torch.vtensor<[2,3],f32>) -> ()
}) : () -> ()

// CHECK:      gnomon-opt: error: unsupported op aten.foo at node 'bar' in the input
// CHECK-NEXT: gnomon-opt: error: unsupported op aten.baz at node 'qux' in the input
// CHECK-NOT:  Traceback
