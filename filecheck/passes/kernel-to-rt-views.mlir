// RUN: gnomon-opt %s --split-input-file -p kernel-to-rt | filecheck %s

// A concat whose slots are contiguous (all dims before the axis are 1) launches nothing: its
// inputs' kernels write into windows of its buffer. Concats nest, as in a DenseNet block: %c1 is
// itself a slot of %c2, so %a, %b and %d all live in %c2's buffer, which exists from the first
// launch. A concat at batch 2 (strided slots) stays a copy.

// CHECK:       func.func @dense_block(%[[X:.*]]: memref<1x2x4x4xf32>, %[[Y:.*]]: memref<2x2x2xf32>)
// CHECK-NEXT:    %[[C2:.*]] = rt.buffer 0 : memref<1x6x4x4xf32>
// CHECK-NEXT:    %[[A:.*]] = rt.view %[[C2]] [0] : memref<1x6x4x4xf32> -> memref<1x2x4x4xf32>
// CHECK-NEXT:    rt.launch @relu_0(%[[X]]) outs(%[[A]])
// CHECK-NEXT:    %[[B:.*]] = rt.view %[[C2]] [32] : memref<1x6x4x4xf32> -> memref<1x2x4x4xf32>
// CHECK-NEXT:    rt.launch @tanh_1(%[[A]]) outs(%[[B]])
// CHECK-NEXT:    %[[C1:.*]] = rt.view %[[C2]] [0] : memref<1x6x4x4xf32> -> memref<1x4x4x4xf32>
// CHECK-NEXT:    %[[D:.*]] = rt.view %[[C2]] [64] : memref<1x6x4x4xf32> -> memref<1x2x4x4xf32>
// CHECK-NEXT:    rt.launch @tanh_1(%[[B]]) outs(%[[D]])
// CHECK-NEXT:    %[[E:.*]] = rt.buffer {{[0-9]+}} : memref<2x2x2xf32>
// CHECK-NEXT:    rt.launch @relu_{{[0-9]+}}(%[[Y]]) outs(%[[E]])
// CHECK-NEXT:    %[[F:.*]] = rt.buffer {{[0-9]+}} : memref<2x2x2xf32>
// CHECK-NEXT:    rt.launch @tanh_{{[0-9]+}}(%[[E]]) outs(%[[F]])
// CHECK-NEXT:    %[[G:.*]] = rt.buffer {{[0-9]+}} : memref<2x4x2xf32>
// CHECK-NEXT:    rt.launch @concat_{{[0-9]+}}(%[[E]], %[[F]]) outs(%[[G]])
// CHECK-NEXT:    func.return %[[C2]], %[[C1]], %[[G]]

func.func @dense_block(%x: tensor<1x2x4x4xf32>, %y: tensor<2x2x2xf32>) -> (tensor<1x6x4x4xf32>, tensor<1x4x4x4xf32>, tensor<2x4x2xf32>) {
  %a = kernel.generated "relu_0" (%x) schedule <tile = [0, 0, 0, 0], vector = 8, order = [0, 1, 2, 3], threads = 1> : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  ^bb0(%i: tensor<1x2x4x4xf32>):
    %r = graph.relu %i : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    kernel.yield %r : tensor<1x2x4x4xf32>
  }
  %b = kernel.generated "tanh_1" (%a) schedule <tile = [0, 0, 0, 0], vector = 8, order = [0, 1, 2, 3], threads = 1> : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  ^bb0(%i: tensor<1x2x4x4xf32>):
    %r = graph.tanh %i : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    kernel.yield %r : tensor<1x2x4x4xf32>
  }
  %c1 = kernel.library "aten.cat" (%a, %b) : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x4x4x4xf32> {
  ^bb0(%i: tensor<1x2x4x4xf32>, %j: tensor<1x2x4x4xf32>):
    %r = graph.concat %i, %j {axis = 1 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x4x4x4xf32>
    kernel.yield %r : tensor<1x4x4x4xf32>
  }
  %d = kernel.generated "tanh_1" (%b) schedule <tile = [0, 0, 0, 0], vector = 8, order = [0, 1, 2, 3], threads = 1> : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  ^bb0(%i: tensor<1x2x4x4xf32>):
    %r = graph.tanh %i : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    kernel.yield %r : tensor<1x2x4x4xf32>
  }
  %c2 = kernel.library "aten.cat" (%c1, %d) : (tensor<1x4x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x6x4x4xf32> {
  ^bb0(%i: tensor<1x4x4x4xf32>, %j: tensor<1x2x4x4xf32>):
    %r = graph.concat %i, %j {axis = 1 : i64} : (tensor<1x4x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x6x4x4xf32>
    kernel.yield %r : tensor<1x6x4x4xf32>
  }
  %e = kernel.generated "relu_2" (%y) schedule <tile = [0, 0, 0], vector = 8, order = [0, 1, 2], threads = 1> : (tensor<2x2x2xf32>) -> tensor<2x2x2xf32> {
  ^bb0(%i: tensor<2x2x2xf32>):
    %r = graph.relu %i : (tensor<2x2x2xf32>) -> tensor<2x2x2xf32>
    kernel.yield %r : tensor<2x2x2xf32>
  }
  %f = kernel.generated "tanh_3" (%e) schedule <tile = [0, 0, 0], vector = 8, order = [0, 1, 2], threads = 1> : (tensor<2x2x2xf32>) -> tensor<2x2x2xf32> {
  ^bb0(%i: tensor<2x2x2xf32>):
    %r = graph.tanh %i : (tensor<2x2x2xf32>) -> tensor<2x2x2xf32>
    kernel.yield %r : tensor<2x2x2xf32>
  }
  %g = kernel.library "aten.cat" (%e, %f) : (tensor<2x2x2xf32>, tensor<2x2x2xf32>) -> tensor<2x4x2xf32> {
  ^bb0(%i: tensor<2x2x2xf32>, %j: tensor<2x2x2xf32>):
    %r = graph.concat %i, %j {axis = 1 : i64} : (tensor<2x2x2xf32>, tensor<2x2x2xf32>) -> tensor<2x4x2xf32>
    kernel.yield %r : tensor<2x4x2xf32>
  }
  func.return %c2, %c1, %g : tensor<1x6x4x4xf32>, tensor<1x4x4x4xf32>, tensor<2x4x2xf32>
}

// -----

// A slice whose result is a contiguous window of its input is a windowed view, of an argument or of
// a buffer alike; a strided slice is a kernel.

// CHECK:       func.func @slices(
// CHECK-SAME:      %[[X:.*]]: memref<3x4x8xf32>)
// CHECK-NEXT:    %[[ROW:.*]] = rt.view %[[X]] [32] : memref<3x4x8xf32> -> memref<1x4x8xf32>
// CHECK-NEXT:    %[[B:.*]] = rt.buffer 0 : memref<1x4x8xf32>
// CHECK-NEXT:    rt.launch @relu_0(%[[ROW]]) outs(%[[B]])
// CHECK-NEXT:    %[[PART:.*]] = rt.view %[[B]] [8] : memref<1x4x8xf32> -> memref<1x2x8xf32>
// CHECK-NEXT:    %[[S:.*]] = rt.buffer {{[0-9]+}} : memref<1x2x8xf32>
// CHECK-NEXT:    rt.launch @slice_{{[0-9]+}}(%[[B]]) outs(%[[S]])
// CHECK-NEXT:    func.return %[[PART]], %[[S]]

func.func @slices(%x: tensor<3x4x8xf32>) -> (tensor<1x2x8xf32>, tensor<1x2x8xf32>) {
  %row = kernel.library "aten.slice" (%x) : (tensor<3x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%i: tensor<3x4x8xf32>):
    %r = graph.slice %i {starts = array<i64: 1, 0, 0>, ends = array<i64: 2, 4, 8>, steps = array<i64: 1, 1, 1>} : (tensor<3x4x8xf32>) -> tensor<1x4x8xf32>
    kernel.yield %r : tensor<1x4x8xf32>
  }
  %b = kernel.generated "relu_0" (%row) schedule <tile = [0, 0, 0], vector = 8, order = [0, 1, 2], threads = 1> : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%i: tensor<1x4x8xf32>):
    %r = graph.relu %i : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
    kernel.yield %r : tensor<1x4x8xf32>
  }
  %part = kernel.library "aten.slice" (%b) : (tensor<1x4x8xf32>) -> tensor<1x2x8xf32> {
  ^bb0(%i: tensor<1x4x8xf32>):
    %r = graph.slice %i {starts = array<i64: 0, 1, 0>, ends = array<i64: 1, 3, 8>, steps = array<i64: 1, 1, 1>} : (tensor<1x4x8xf32>) -> tensor<1x2x8xf32>
    kernel.yield %r : tensor<1x2x8xf32>
  }
  %strided = kernel.library "aten.slice" (%b) : (tensor<1x4x8xf32>) -> tensor<1x2x8xf32> {
  ^bb0(%i: tensor<1x4x8xf32>):
    %r = graph.slice %i {starts = array<i64: 0, 0, 0>, ends = array<i64: 1, 4, 8>, steps = array<i64: 1, 2, 1>} : (tensor<1x4x8xf32>) -> tensor<1x2x8xf32>
    kernel.yield %r : tensor<1x2x8xf32>
  }
  func.return %part, %strided : tensor<1x2x8xf32>, tensor<1x2x8xf32>
}
