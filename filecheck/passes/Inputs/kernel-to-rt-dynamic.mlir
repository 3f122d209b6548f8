func.func @dynamic(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %y = kernel.generated "relu_0" (%x) schedule <tile = [0, 0], vector = 8, order = [0, 1], threads = 1> : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    %r = graph.relu %a : (tensor<?x8xf32>) -> tensor<?x8xf32>
    kernel.yield %r : tensor<?x8xf32>
  }
  func.return %y : tensor<?x8xf32>
}
