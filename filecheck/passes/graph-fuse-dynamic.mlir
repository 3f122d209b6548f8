// RUN: gnomon-opt %s -p 'graph-fuse{device=generic-cpu threads=2}' | filecheck %s

// A `?` dim with a declared range is priced at the top of its range (where the memory plan is made); a `?` with
// none cannot be priced, and the join is taken unpriced.

builtin.module attributes {gnomon.dim_bounds = {n = 64 : i64}} {
  // CHECK-LABEL: func.func @ranged(
  // CHECK:         graph.tanh {{.*}}gnomon.fusion = {group = 0 : i64, decision = "fuse", separate_s = {{.*}} : f64, fused_s = {{.*}} : f64}}
  func.func @ranged(%x: tensor<?x256xf32, #graph.dims<["n", ""]>>, %b: tensor<256xf32>) -> tensor<?x256xf32, #graph.dims<["n", ""]>> {
    %s = graph.add %x, %b : (tensor<?x256xf32, #graph.dims<["n", ""]>>, tensor<256xf32>) -> tensor<?x256xf32, #graph.dims<["n", ""]>>
    %t = graph.tanh %s : (tensor<?x256xf32, #graph.dims<["n", ""]>>) -> tensor<?x256xf32, #graph.dims<["n", ""]>>
    func.return %t : tensor<?x256xf32, #graph.dims<["n", ""]>>
  }

  // CHECK-LABEL: func.func @unranged(
  // CHECK:         graph.tanh {{.*}}gnomon.fusion = {group = 0 : i64, decision = "fuse", unpriced}
  func.func @unranged(%x: tensor<?x256xf32, #graph.dims<["m", ""]>>, %b: tensor<256xf32>) -> tensor<?x256xf32, #graph.dims<["m", ""]>> {
    %s = graph.add %x, %b : (tensor<?x256xf32, #graph.dims<["m", ""]>>, tensor<256xf32>) -> tensor<?x256xf32, #graph.dims<["m", ""]>>
    %t = graph.tanh %s : (tensor<?x256xf32, #graph.dims<["m", ""]>>) -> tensor<?x256xf32, #graph.dims<["m", ""]>>
    func.return %t : tensor<?x256xf32, #graph.dims<["m", ""]>>
  }
}
