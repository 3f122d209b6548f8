// RUN: gnomon-opt %s -p 'graph-predicate{device=h100}' | filecheck %s
// RUN: gnomon-opt %s -p 'graph-predicate{device=h100 mode=never}' | filecheck %s --check-prefix=NEVER
// RUN: gnomon-opt %s -p 'graph-predicate{device=h100},graph-fold-constants,graph-canonicalize' | filecheck %s --check-prefix=FOLDED

// A branch becomes both sides and a select: on a GPU, a host decision (a sync and a copy back) costs more than a
// small side computed for nothing.

// CHECK-LABEL: func.func @branch(
// CHECK-NOT:     graph.if %
// CHECK:         %[[R:.*]] = graph.relu %x
// CHECK:         %[[M:.*]] = graph.mul %x, %x
// CHECK:         graph.where %p, %[[R]], %[[M]] {gnomon.predicated = {op = "graph.if", index = 1 : i64, at = "{{.*}}", host_s = {{.*}} : f64, predicated_s = {{.*}} : f64}}
// NEVER-LABEL: func.func @branch(
// NEVER:         graph.if %p {{.*}} {
// NEVER:         } {gnomon.predicate = {decision = "host", host_s = {{.*}} : f64, predicated_s = {{.*}} : f64}}
func.func @branch(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %s = graph.reduce_sum %x {axes = array<i64>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  %z = graph.constant {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %p = graph.gt %s, %z : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %y = graph.if %p : tensor<i1> -> (tensor<2x4xf32>) {
    %r = graph.relu %x : (tensor<2x4xf32>) -> tensor<2x4xf32>
    graph.yield %r : tensor<2x4xf32>
  } else {
    %m = graph.mul %x, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    graph.yield %m : tensor<2x4xf32>
  }
  func.return %y : tensor<2x4xf32>
}

// A counted loop: each copy's condition compares constants, so once they fold the selects go and the loop is
// unrolled into three matmul-tanh steps.

// CHECK-LABEL: func.func @counted(
// CHECK-NOT:     graph.while (
// FOLDED-LABEL: func.func @counted(
// FOLDED-NOT:    graph.where
// FOLDED-COUNT-3: graph.tanh
// FOLDED-NOT:    graph.where
// FOLDED:        func.return
func.func @counted(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> tensor<2x4xf32> {
  %n0 = graph.constant {value = dense<0> : tensor<i64>} : () -> tensor<i64>
  %n, %h = graph.while (%n0, %x) : (tensor<i64>, tensor<2x4xf32>) -> (tensor<i64>, tensor<2x4xf32>) {max_trips = 3 : i64} cond {
  ^bb0(%i: tensor<i64>, %a: tensor<2x4xf32>):
    %three = graph.constant {value = dense<3> : tensor<i64>} : () -> tensor<i64>
    %go = graph.lt %i, %three : (tensor<i64>, tensor<i64>) -> tensor<i1>
    graph.yield %go : tensor<i1>
  } do {
  ^bb0(%i: tensor<i64>, %a: tensor<2x4xf32>):
    %one = graph.constant {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %next = graph.add %i, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %l = graph.matmul %a, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %t = graph.tanh %l : (tensor<2x4xf32>) -> tensor<2x4xf32>
    graph.yield %next, %t : tensor<i64>, tensor<2x4xf32>
  }
  func.return %h : tensor<2x4xf32>
}

// A loop with no bound on its trips stays on the host, and says why.

// CHECK-LABEL: func.func @unbounded(
// CHECK:         graph.while (%x) : {{.*}} {gnomon.predicate = {decision = "host", reason = "no bound on its trips"}} cond {
func.func @unbounded(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %h = graph.while (%x) : (tensor<2x4xf32>) -> (tensor<2x4xf32>) cond {
  ^bb0(%a: tensor<2x4xf32>):
    %s = graph.reduce_sum %a {axes = array<i64>, keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
    %one = graph.constant {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %go = graph.gt %s, %one : (tensor<f32>, tensor<f32>) -> tensor<i1>
    graph.yield %go : tensor<i1>
  } do {
  ^bb0(%a: tensor<2x4xf32>):
    %half = graph.constant {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
    %m = graph.mul %a, %half : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    graph.yield %m : tensor<2x4xf32>
  }
  func.return %h : tensor<2x4xf32>
}

// A gather at an index the branch guards is not computed on the side not taken: there it may be out of range.

// CHECK-LABEL: func.func @guarded(
// CHECK:         graph.if %p
// CHECK:           graph.gather %x, %i
// CHECK:         } {gnomon.predicate = {decision = "host", host_s = {{.*}} : f64, reason = "graph.gather reads at indices from data: where the branch is not taken they may be out of range"}}
func.func @guarded(%x: tensor<4x8xf32>, %i: tensor<1xi64>) -> tensor<1x8xf32> {
  %n = graph.constant {value = dense<4> : tensor<1xi64>} : () -> tensor<1xi64>
  %p = graph.lt %i, %n : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi1>
  %y = graph.if %p : tensor<1xi1> -> (tensor<1x8xf32>) {
    %r = graph.gather %x, %i {axis = 0 : i64} : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
    graph.yield %r : tensor<1x8xf32>
  } else {
    %z = graph.constant {value = dense<0.0> : tensor<1x8xf32>} : () -> tensor<1x8xf32>
    graph.yield %z : tensor<1x8xf32>
  }
  func.return %y : tensor<1x8xf32>
}
