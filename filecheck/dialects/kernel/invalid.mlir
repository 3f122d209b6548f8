// RUN: gnomon-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One case per message of the kernel dialect's verifiers.

func.func @bad_order(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: kernel.schedule: order [1] is not a permutation of its loops
  %y = kernel.generated "relu_0" (%a) schedule <tile = [0], vector = 8, order = [1], threads = 1> : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %r = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    kernel.yield %r : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @bad_tiles(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: kernel.schedule: 2 tile sizes for 1 loops
  %y = kernel.generated "relu_0" (%a) schedule <tile = [0, 4], vector = 8, order = [0], threads = 1> : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %r = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    kernel.yield %r : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @arguments_differ(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: kernel.library: body arguments (tensor<8xf32>) differ from operand types (tensor<4xf32>)
  %y = kernel.library "aten.relu" (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<8xf32>):
    %r = graph.relu %x : (tensor<8xf32>) -> tensor<8xf32>
    kernel.yield %r : tensor<8xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @yield_differs(%a: tensor<4xf32>) -> tensor<4xi64> {
  // CHECK: kernel.library: kernel.yield gives (tensor<4xf32>), the kernel returns (tensor<4xi64>)
  %y = kernel.library "aten.relu" (%a) : (tensor<4xf32>) -> tensor<4xi64> {
  ^bb0(%x: tensor<4xf32>):
    %r = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    kernel.yield %r : tensor<4xf32>
  }
  func.return %y : tensor<4xi64>
}

// -----

kernel.func @no_callee(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kind = "library"} {
  // CHECK: kernel.func @no_callee: a library kernel needs a callee
  %r = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  kernel.yield %r : tensor<4xf32>
}

// -----

func.func @joined_callee(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: kernel.library: callee "aten.abs+relu" must name one library function; fused ops go in its epilogue
  %y = kernel.library "aten.abs+relu" (%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    %r = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    kernel.yield %r : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @epilogue_differs(%a: tensor<4x8xf32>, %w: tensor<2x8xf32>) -> tensor<4x2xf32> {
  // CHECK: kernel.library: epilogue ["relu"] differs from the ops after graph.linear: ["tanh"]
  %y = kernel.library "aten.linear" epilogue ["relu"] (%a, %w) : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x2xf32> {
  ^bb0(%x: tensor<4x8xf32>, %m: tensor<2x8xf32>):
    %l = graph.linear %x, %m : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x2xf32>
    %t = graph.tanh %l : (tensor<4x2xf32>) -> tensor<4x2xf32>
    kernel.yield %t : tensor<4x2xf32>
  }
  func.return %y : tensor<4x2xf32>
}

// -----

func.func @epilogue_missing(%a: tensor<4x8xf32>, %w: tensor<2x8xf32>) -> tensor<4x2xf32> {
  // CHECK: kernel.library: the body has 2 ops, expected 0 transposes, the anchor and epilogue []
  %y = kernel.library "aten.linear" (%a, %w) : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x2xf32> {
  ^bb0(%x: tensor<4x8xf32>, %m: tensor<2x8xf32>):
    %l = graph.linear %x, %m : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x2xf32>
    %t = graph.tanh %l : (tensor<4x2xf32>) -> tensor<4x2xf32>
    kernel.yield %t : tensor<4x2xf32>
  }
  func.return %y : tensor<4x2xf32>
}

// -----

func.func @transposed_out_of_range(%a: tensor<3x8xf32>, %b: tensor<2x8xf32>) -> tensor<3x2xf32> {
  // CHECK: kernel.library: transposed [2] must be increasing indices of graph.matmul's 2 operands
  %y = kernel.library "aten.matmul" transposed [2] (%a, %b) : (tensor<3x8xf32>, tensor<2x8xf32>) -> tensor<3x2xf32> {
  ^bb0(%x: tensor<3x8xf32>, %m: tensor<2x8xf32>):
    %n = graph.transpose %m {permutation = array<i64: 1, 0>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
    %r = graph.matmul %x, %n : (tensor<3x8xf32>, tensor<8x2xf32>) -> tensor<3x2xf32>
    kernel.yield %r : tensor<3x2xf32>
  }
  func.return %y : tensor<3x2xf32>
}

// -----

func.func @transposed_not_a_transpose(%a: tensor<3x8xf32>, %b: tensor<8x2xf32>) -> tensor<3x2xf32> {
  // CHECK: kernel.library: transposed operand 0 of graph.matmul is not a graph.transpose
  %y = kernel.library "aten.matmul" transposed [0] (%a, %b) : (tensor<3x8xf32>, tensor<8x2xf32>) -> tensor<3x2xf32> {
  ^bb0(%x: tensor<3x8xf32>, %m: tensor<8x2xf32>):
    %n = graph.neg %m : (tensor<8x2xf32>) -> tensor<8x2xf32>
    %r = graph.matmul %x, %n : (tensor<3x8xf32>, tensor<8x2xf32>) -> tensor<3x2xf32>
    kernel.yield %r : tensor<3x2xf32>
  }
  func.return %y : tensor<3x2xf32>
}

// -----

kernel.func @generated_epilogue(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kind = "generated", epilogue = ["relu"], schedule = #kernel.schedule<tile = [0], vector = 8, order = [0], threads = 1>} {
  // CHECK: kernel.func @generated_epilogue: epilogue and transposed describe library calls, not generated kernels
  %r = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  kernel.yield %r : tensor<4xf32>
}

// -----

kernel.func @func_epilogue_differs(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kind = "library", callee = "aten.abs", epilogue = ["sigmoid"]} {
  // CHECK: kernel.func @func_epilogue_differs: epilogue ["sigmoid"] differs from the ops after graph.abs: ["relu"]
  %a = graph.abs %x : (tensor<4xf32>) -> tensor<4xf32>
  %r = graph.relu %a : (tensor<4xf32>) -> tensor<4xf32>
  kernel.yield %r : tensor<4xf32>
}
