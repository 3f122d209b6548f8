// RUN: gnomon-opt %s -p 'graph-recompute{budget="60%" solver=z3 device=generic-cpu threads=2}' | filecheck %s
// RUN: gnomon-opt %s -p 'graph-recompute{budget="60%" solver=milp device=generic-cpu threads=2}' | filecheck %s
// RUN: gnomon-opt %s -p 'graph-recompute{solver=none device=generic-cpu threads=2}' | filecheck %s --check-prefix=NONE

// A training step (its loss first): exp(x) is saved for the backward pass, which first makes and reduces a
// temporary as large (read twice, so it is a buffer of its own). Keeping exp(x) through it doubles the peak;
// computing it again just before its backward use does not, and the budget (60% of the peak) asks for that.

// CHECK-LABEL: func.func @step(
// CHECK-SAME:    gnomon.recompute = {solver = "{{z3|milp}}", status = "optimal", budget_bytes = 314580 : i64, peak_bytes = 263176 : i64, peak_bytes_without_recompute = 524300 : i64, predicted_overhead_s = {{.*}} : f64, solve_s = {{.*}} : f64, recomputed = [{kernel = "graph.exp at ?", predicted_s = {{.*}} : f64}], gap = 0.000000e+00 : f64}
// CHECK:         %[[A:.*]] = graph.exp %x
// CHECK-NEXT:    %[[L:.*]] = graph.reduce_sum %[[A]]
// CHECK-NEXT:    %[[T:.*]] = graph.mul %x, %x
// CHECK-NEXT:    %[[S:.*]] = graph.reduce_sum %[[T]]
// CHECK-NEXT:    %[[U:.*]] = graph.reduce_max %[[T]]
// CHECK-NEXT:    %[[V:.*]] = graph.add %[[S]], %[[U]]
// CHECK-NEXT:    %[[COPY:.*]] = graph.exp %x {gnomon.recompute = "copy"}
// CHECK-NEXT:    %[[M:.*]] = graph.mul %[[COPY]], %[[V]]
// CHECK-NEXT:    %[[G:.*]] = graph.reduce_sum %[[M]]
// CHECK-NEXT:    func.return %[[L]], %[[G]]

// NONE:          gnomon.recompute = {solver = "none", status = "fits", budget_bytes = 524300 : i64, peak_bytes = 524300 : i64, peak_bytes_without_recompute = 524300 : i64, predicted_overhead_s = 0.000000e+00 : f64, solve_s = {{.*}} : f64, recomputed = []}
// NONE-NOT:      gnomon.recompute = "copy"
func.func @step(%x: tensor<256x256xf32>) -> (tensor<f32>, tensor<256xf32>) {
  %a = graph.exp %x : (tensor<256x256xf32>) -> tensor<256x256xf32>
  %l = graph.reduce_sum %a {axes = array<i64>, keepdims = false} : (tensor<256x256xf32>) -> tensor<f32>
  %t = graph.mul %x, %x : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %s = graph.reduce_sum %t {axes = array<i64>, keepdims = false} : (tensor<256x256xf32>) -> tensor<f32>
  %u = graph.reduce_max %t {axes = array<i64>, keepdims = false} : (tensor<256x256xf32>) -> tensor<f32>
  %v = graph.add %s, %u : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %m = graph.mul %a, %v : (tensor<256x256xf32>, tensor<f32>) -> tensor<256x256xf32>
  %g = graph.reduce_sum %m {axes = array<i64: 1>, keepdims = false} : (tensor<256x256xf32>) -> tensor<256xf32>
  func.return %l, %g : tensor<f32>, tensor<256xf32>
}
