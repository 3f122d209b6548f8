// RUN: gnomon-opt %s --split-input-file -p kernel-to-rt | filecheck %s
// RUN: not gnomon-opt %S/Inputs/kernel-to-rt-dynamic.mlir -p kernel-to-rt 2>&1 | filecheck %s --check-prefix=DYNAMIC

// The runtime plans memory at each dynamic dim's bound: an unnamed one is one clear line naming the function, the
// value and the dim (kernel-to-rt-dynamic.mlir has named, bounded ones).
// DYNAMIC: gnomon-opt: error: @dynamic: dim 0 of input 0 (tensor<?x8xf32>) is `?` without a name; the runtime plans memory at each dynamic dim's bound: name it and declare its range

// Three transposes (not pointwise: none may overwrite its input) need two buffers, the third
// reusing the first's memory; identical kernels are outlined once. The pointwise mul+relu writes
// over its dying input (in place); the reshape is a view; the weight stays out of the arena.

// CHECK:       kernel.func @transpose_0(%{{.*}}: tensor<16x16xf32>) -> tensor<16x16xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [0, 1], threads = 1>} {
// CHECK-NEXT:    %{{.*}} = graph.transpose
// CHECK-NEXT:    kernel.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  kernel.func @mul_relu_1(
// CHECK:       func.func @reuse(%[[X:.*]]: memref<16x16xf32>) -> memref<256xf32> attributes {rt.arena_size = 2048 : i64, rt.arena_lower_bound = 2048 : i64} {
// CHECK-NEXT:    %[[B0:.*]] = rt.buffer 0 : memref<16x16xf32>
// CHECK-NEXT:    rt.launch @transpose_0(%[[X]]) outs(%[[B0]]) : (memref<16x16xf32>) -> (memref<16x16xf32>)
// CHECK-NEXT:    %[[B1:.*]] = rt.buffer 1024 : memref<16x16xf32>
// CHECK-NEXT:    rt.launch @transpose_0(%[[B0]]) outs(%[[B1]])
// CHECK-NEXT:    %[[B2:.*]] = rt.buffer 0 : memref<16x16xf32>
// CHECK-NEXT:    rt.launch @transpose_0(%[[B1]]) outs(%[[B2]])
// CHECK-NEXT:    %[[W:.*]] = rt.constant dense<2.000000e+00> : tensor<16x16xf32> -> memref<16x16xf32>
// CHECK-NEXT:    %[[B3:.*]] = rt.buffer 0 : memref<16x16xf32>
// CHECK-NEXT:    rt.launch @mul_relu_1(%[[B2]], %[[W]]) outs(%[[B3]])
// CHECK-NEXT:    %[[V:.*]] = rt.view %[[B3]] : memref<16x16xf32> -> memref<256xf32>
// CHECK-NEXT:    func.return %[[V]] : memref<256xf32>

func.func @reuse(%x: tensor<16x16xf32>) -> tensor<256xf32> {
  %t1 = kernel.generated "transpose_0" (%x) schedule <tile = [0, 0], vector = 8, order = [0, 1], threads = 1> : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%a: tensor<16x16xf32>):
    %r = graph.transpose %a {permutation = array<i64: 1, 0>} : (tensor<16x16xf32>) -> tensor<16x16xf32>
    kernel.yield %r : tensor<16x16xf32>
  }
  %t2 = kernel.generated "transpose_0" (%t1) schedule <tile = [0, 0], vector = 8, order = [0, 1], threads = 1> : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%a: tensor<16x16xf32>):
    %r = graph.transpose %a {permutation = array<i64: 1, 0>} : (tensor<16x16xf32>) -> tensor<16x16xf32>
    kernel.yield %r : tensor<16x16xf32>
  }
  %t3 = kernel.generated "transpose_0" (%t2) schedule <tile = [0, 0], vector = 8, order = [0, 1], threads = 1> : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%a: tensor<16x16xf32>):
    %r = graph.transpose %a {permutation = array<i64: 1, 0>} : (tensor<16x16xf32>) -> tensor<16x16xf32>
    kernel.yield %r : tensor<16x16xf32>
  }
  %w = graph.constant {value = dense<2.0> : tensor<16x16xf32>} : () -> tensor<16x16xf32>
  %y = kernel.generated "mul_relu_1" (%t3, %w) schedule <tile = [0, 0], vector = 8, order = [0, 1], threads = 1> : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%a: tensor<16x16xf32>, %b: tensor<16x16xf32>):
    %m = graph.mul %a, %b : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
    %r = graph.relu %m : (tensor<16x16xf32>) -> tensor<16x16xf32>
    kernel.yield %r : tensor<16x16xf32>
  }
  %v = graph.reshape %y : (tensor<16x16xf32>) -> tensor<256xf32>
  func.return %v : tensor<256xf32>
}

// -----

// An outlined library kernel keeps its call: callee, epilogue and transposed operands. Launches of
// the same call on the same types share one kernel.func; another epilogue is another kernel.

// CHECK:       kernel.func @transpose_matmul_add_relu_0(%{{.*}}: tensor<8x3xf32>, %{{.*}}: tensor<8x3xf32>, %{{.*}}: tensor<3xf32>) -> tensor<3x3xf32> attributes {kind = "library", callee = "aten.matmul", epilogue = ["add", "relu"], transposed = array<i64: 0>} {
// CHECK:       kernel.func @transpose_matmul_add_1(%{{.*}}: tensor<8x3xf32>, %{{.*}}: tensor<8x3xf32>, %{{.*}}: tensor<3xf32>) -> tensor<3x3xf32> attributes {kind = "library", callee = "aten.matmul", epilogue = ["add"], transposed = array<i64: 0>} {
// CHECK:       func.func @library_calls(
// CHECK:         rt.launch @transpose_matmul_add_relu_0(
// CHECK:         rt.launch @transpose_matmul_add_relu_0(
// CHECK:         rt.launch @transpose_matmul_add_1(
// CHECK:         rt.launch @add_add_2(

func.func @library_calls(%x: tensor<8x3xf32>, %w: tensor<8x3xf32>, %b: tensor<3xf32>) -> tensor<3x3xf32> {
  %y = kernel.library "aten.matmul" epilogue ["add", "relu"] transposed [0] (%x, %w, %b) : (tensor<8x3xf32>, tensor<8x3xf32>, tensor<3xf32>) -> tensor<3x3xf32> {
  ^bb0(%a: tensor<8x3xf32>, %m: tensor<8x3xf32>, %c: tensor<3xf32>):
    %t = graph.transpose %a {permutation = array<i64: 1, 0>} : (tensor<8x3xf32>) -> tensor<3x8xf32>
    %p = graph.matmul %t, %m : (tensor<3x8xf32>, tensor<8x3xf32>) -> tensor<3x3xf32>
    %s = graph.add %p, %c : (tensor<3x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
    %r = graph.relu %s : (tensor<3x3xf32>) -> tensor<3x3xf32>
    kernel.yield %r : tensor<3x3xf32>
  }
  %z = kernel.library "aten.matmul" epilogue ["add", "relu"] transposed [0] (%x, %w, %b) : (tensor<8x3xf32>, tensor<8x3xf32>, tensor<3xf32>) -> tensor<3x3xf32> {
  ^bb0(%a: tensor<8x3xf32>, %m: tensor<8x3xf32>, %c: tensor<3xf32>):
    %t = graph.transpose %a {permutation = array<i64: 1, 0>} : (tensor<8x3xf32>) -> tensor<3x8xf32>
    %p = graph.matmul %t, %m : (tensor<3x8xf32>, tensor<8x3xf32>) -> tensor<3x3xf32>
    %s = graph.add %p, %c : (tensor<3x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
    %r = graph.relu %s : (tensor<3x3xf32>) -> tensor<3x3xf32>
    kernel.yield %r : tensor<3x3xf32>
  }
  %u = kernel.library "aten.matmul" epilogue ["add"] transposed [0] (%x, %w, %b) : (tensor<8x3xf32>, tensor<8x3xf32>, tensor<3xf32>) -> tensor<3x3xf32> {
  ^bb0(%a: tensor<8x3xf32>, %m: tensor<8x3xf32>, %c: tensor<3xf32>):
    %t = graph.transpose %a {permutation = array<i64: 1, 0>} : (tensor<8x3xf32>) -> tensor<3x8xf32>
    %p = graph.matmul %t, %m : (tensor<3x8xf32>, tensor<8x3xf32>) -> tensor<3x3xf32>
    %s = graph.add %p, %c : (tensor<3x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
    kernel.yield %s : tensor<3x3xf32>
  }
  %v = kernel.generated "add_add_2" (%y, %z, %u) schedule <tile = [0, 0], vector = 8, order = [0, 1], threads = 1> : (tensor<3x3xf32>, tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32> {
  ^bb0(%a: tensor<3x3xf32>, %c: tensor<3x3xf32>, %d: tensor<3x3xf32>):
    %s = graph.add %a, %c : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
    %r = graph.add %s, %d : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
    kernel.yield %r : tensor<3x3xf32>
  }
  func.return %v : tensor<3x3xf32>
}

// -----

// A result that updates an argument (`rt.updates`, as a training step's new parameter and momentum) is written
// into the argument's memory by the pointwise kernel that last reads it: no arena buffer, no copy back.

// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[P:[^:]*]]: memref<8xf32>, %[[M:[^:]*]]: memref<8xf32>, %[[G:[^:]*]]: memref<8xf32>)
// CHECK-NEXT:    rt.launch @{{.*}}mul_add_{{.*}}(%[[M]], %[[G]]) outs(%[[M]])
// CHECK-NEXT:    rt.launch @{{.*}}mul_sub_{{.*}}(%[[P]], %[[M]]) outs(%[[P]])
// CHECK-NEXT:    func.return %[[P]], %[[M]]

func.func @step(%p: tensor<8xf32>, %m: tensor<8xf32>, %g: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) attributes {rt.updates = array<i64: 0, 1>} {
  %m2 = kernel.generated "mul_add_0" (%m, %g) schedule <tile = [0], vector = 8, order = [0], threads = 1> : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    %c = graph.constant {value = dense<0.9> : tensor<f32>} : () -> tensor<f32>
    %s = graph.mul %a, %c : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
    %r = graph.add %s, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    kernel.yield %r : tensor<8xf32>
  }
  %p2 = kernel.generated "mul_sub_1" (%p, %m2) schedule <tile = [0], vector = 8, order = [0], threads = 1> : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    %c = graph.constant {value = dense<0.1> : tensor<f32>} : () -> tensor<f32>
    %s = graph.mul %b, %c : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
    %r = graph.sub %a, %s : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    kernel.yield %r : tensor<8xf32>
  }
  func.return %p2, %m2 : tensor<8xf32>, tensor<8xf32>
}

// -----

// An argument read after the kernel that computes its update keeps its old value: that result goes to the arena.

// CHECK-LABEL: func.func @read_later(
// CHECK-SAME:    %[[P:[^:]*]]: memref<8xf32>)
// CHECK-NEXT:    %[[B:.*]] = rt.buffer 0 : memref<8xf32>
// CHECK-NEXT:    rt.launch @neg_{{.*}}(%[[P]]) outs(%[[B]])
// CHECK-NEXT:    %[[C:.*]] = rt.buffer {{.*}} : memref<8xf32>
// CHECK-NEXT:    rt.launch @add_{{.*}}(%[[P]], %[[B]]) outs(%[[C]])

func.func @read_later(%p: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) attributes {rt.updates = array<i64: 0, -1>} {
  %n = kernel.generated "neg_0" (%p) schedule <tile = [0], vector = 8, order = [0], threads = 1> : (tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    %r = graph.neg %a : (tensor<8xf32>) -> tensor<8xf32>
    kernel.yield %r : tensor<8xf32>
  }
  %s = kernel.generated "add_1" (%p, %n) schedule <tile = [0], vector = 8, order = [0], threads = 1> : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    %r = graph.add %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    kernel.yield %r : tensor<8xf32>
  }
  func.return %n, %s : tensor<8xf32>, tensor<8xf32>
}

// -----

// An embedding table's sparse update (a library kernel that adds into its first input) writes into the table it
// updates: only the looked-up rows change.

// CHECK-LABEL: func.func @sparse_update(
// CHECK-SAME:    %[[T:[^:]*]]: memref<10x4xf32>, %[[D:[^:]*]]: memref<2x4xf32>, %[[I:[^:]*]]: memref<3xi64>, %[[O:[^:]*]]: memref<2xi64>)
// CHECK-NEXT:    rt.launch @embedding_bag_update_0(%[[T]], %[[D]], %[[I]], %[[O]]) outs(%[[T]])
// CHECK-NEXT:    func.return %[[T]]

func.func @sparse_update(%t: tensor<10x4xf32>, %dy: tensor<2x4xf32>, %ids: tensor<3xi64>, %offsets: tensor<2xi64>) -> tensor<10x4xf32> attributes {rt.updates = array<i64: 0>} {
  %u = kernel.library "aten.index_add" (%t, %dy, %ids, %offsets) : (tensor<10x4xf32>, tensor<2x4xf32>, tensor<3xi64>, tensor<2xi64>) -> tensor<10x4xf32> {
  ^bb0(%a: tensor<10x4xf32>, %b: tensor<2x4xf32>, %c: tensor<3xi64>, %d: tensor<2xi64>):
    %r = graph.embedding_bag_update %a, %b, %c, %d {mode = "sum", scale = -1.000000e-01 : f64} : (tensor<10x4xf32>, tensor<2x4xf32>, tensor<3xi64>, tensor<2xi64>) -> tensor<10x4xf32>
    kernel.yield %r : tensor<10x4xf32>
  }
  func.return %u : tensor<10x4xf32>
}

// -----

// SparseAdam's update of a table writes the table and both its moments where they are: each of the kernel's
// results into the input at its position.

// CHECK-LABEL: func.func @sparse_adam(
// CHECK-SAME:    %[[T:[^:]*]]: memref<10x4xf32>, %[[M:[^:]*]]: memref<10x4xf32>, %[[V:[^:]*]]: memref<10x4xf32>, %[[D:[^:]*]]: memref<2x4xf32>, %[[I:[^:]*]]: memref<3xi64>, %[[O:[^:]*]]: memref<2xi64>, %[[S:[^:]*]]: memref<f32>)
// CHECK-NEXT:    rt.launch @embedding_bag_adam_update_0(%[[T]], %[[M]], %[[V]], %[[D]], %[[I]], %[[O]], %[[S]]) outs(%[[T]], %[[M]], %[[V]])
// CHECK-NEXT:    func.return %[[T]], %[[M]], %[[V]]

func.func @sparse_adam(%t: tensor<10x4xf32>, %m: tensor<10x4xf32>, %v: tensor<10x4xf32>, %dy: tensor<2x4xf32>, %ids: tensor<3xi64>, %offsets: tensor<2xi64>, %lr: tensor<f32>) -> (tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>) attributes {rt.updates = array<i64: 0, 1, 2>} {
  %u:3 = kernel.library "aten.index_put" (%t, %m, %v, %dy, %ids, %offsets, %lr) : (tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>, tensor<2x4xf32>, tensor<3xi64>, tensor<2xi64>, tensor<f32>) -> (tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>) {
  ^bb0(%a: tensor<10x4xf32>, %b: tensor<10x4xf32>, %c: tensor<10x4xf32>, %d: tensor<2x4xf32>, %e: tensor<3xi64>, %f: tensor<2xi64>, %g: tensor<f32>):
    %r:3 = graph.embedding_bag_adam_update %a, %b, %c, %d, %e, %f, %g {mode = "sum", beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64} : (tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>, tensor<2x4xf32>, tensor<3xi64>, tensor<2xi64>, tensor<f32>) -> (tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>)
    kernel.yield %r#0, %r#1, %r#2 : tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>
  }
  func.return %u#0, %u#1, %u#2 : tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>
}
