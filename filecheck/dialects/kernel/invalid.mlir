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
