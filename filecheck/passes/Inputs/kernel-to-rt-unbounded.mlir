func.func @unbounded(%x: tensor<?x8xf32, #graph.dims<["n", ""]>>) -> tensor<?x8xf32, #graph.dims<["n", ""]>> {
  %y = kernel.generated "relu_0" (%x) schedule <tile = [0, 0], vector = 8, order = [0, 1], threads = 1> : (tensor<?x8xf32, #graph.dims<["n", ""]>>) -> tensor<?x8xf32, #graph.dims<["n", ""]>> {
  ^bb0(%a: tensor<?x8xf32, #graph.dims<["n", ""]>>):
    %r = graph.relu %a : (tensor<?x8xf32, #graph.dims<["n", ""]>>) -> tensor<?x8xf32, #graph.dims<["n", ""]>>
    kernel.yield %r : tensor<?x8xf32, #graph.dims<["n", ""]>>
  }
  func.return %y : tensor<?x8xf32, #graph.dims<["n", ""]>>
}
