// RUN: gnomon-opt %s -p kernel-to-rt | filecheck %s
// RUN: not gnomon-opt %S/Inputs/kernel-to-rt-unbounded.mlir -p kernel-to-rt 2>&1 | filecheck %s --check-prefix=UNBOUNDED

// A named `?` dim with a bound (`gnomon.dim_bounds`): buffers are planned at the bound (1 x 16 x 8 f32 = 512
// bytes; the relu overwrites its input, of the same type), every value keeps its dim names (`dims`, the
// argument's `rt.dims`), and the function the ranges. The slice of a row is a copy, not a window: its offset
// (1 x seq x 8 elements) would depend on the `?`.

// CHECK:       func.func @dynamic(%[[X:.*]]: memref<3x?x8xf32> {rt.dims = #graph.dims<["", "seq", ""]>}) -> memref<?x8xf32>
// CHECK-SAME:    rt.arena_size = 512 : i64
// CHECK-SAME:    rt.dim_ranges = {seq = array<i64: 2, 16>}
// CHECK-NEXT:    %[[ROW:.*]] = rt.buffer 0 dims #graph.dims<["", "seq", ""]> : memref<1x?x8xf32>
// CHECK-NEXT:    rt.launch @slice_0(%[[X]]) outs(%[[ROW]]) : (memref<3x?x8xf32>) -> (memref<1x?x8xf32>)
// CHECK-NEXT:    %[[R:.*]] = rt.buffer 0 dims #graph.dims<["", "seq", ""]> : memref<1x?x8xf32>
// CHECK-NEXT:    rt.launch @relu_1(%[[ROW]]) outs(%[[R]])
// CHECK-NEXT:    %[[V:.*]] = rt.view %[[R]] dims #graph.dims<["seq", ""]> : memref<1x?x8xf32> -> memref<?x8xf32>
// CHECK-NEXT:    func.return %[[V]] : memref<?x8xf32>

// UNBOUNDED: gnomon-opt: error: @unbounded: dim 0 (n) of input 0 (tensor<?x8xf32, #graph.dims<["n", ""]>>) has no upper bound; declare its range (e.g. --input-shape n=1..64, or dim_ranges={'n': (1, 64)})

builtin.module attributes {gnomon.dim_bounds = {seq = 16 : i64}, gnomon.dim_lower_bounds = {seq = 2 : i64}} {
  func.func @dynamic(%x: tensor<3x?x8xf32, #graph.dims<["", "seq", ""]>>) -> tensor<?x8xf32, #graph.dims<["seq", ""]>> {
    %row = kernel.library "aten.slice" (%x) : (tensor<3x?x8xf32, #graph.dims<["", "seq", ""]>>) -> tensor<1x?x8xf32, #graph.dims<["", "seq", ""]>> {
    ^bb0(%i: tensor<3x?x8xf32, #graph.dims<["", "seq", ""]>>):
      %r = graph.slice %i {starts = array<i64: 1, 0, 0>, ends = array<i64: 2, -1, 8>, steps = array<i64: 1, 1, 1>} : (tensor<3x?x8xf32, #graph.dims<["", "seq", ""]>>) -> tensor<1x?x8xf32, #graph.dims<["", "seq", ""]>>
      kernel.yield %r : tensor<1x?x8xf32, #graph.dims<["", "seq", ""]>>
    }
    %b = kernel.generated "relu_0" (%row) schedule <tile = [0, 0, 0], vector = 8, order = [0, 1, 2], threads = 1> : (tensor<1x?x8xf32, #graph.dims<["", "seq", ""]>>) -> tensor<1x?x8xf32, #graph.dims<["", "seq", ""]>> {
    ^bb0(%i: tensor<1x?x8xf32, #graph.dims<["", "seq", ""]>>):
      %r = graph.relu %i : (tensor<1x?x8xf32, #graph.dims<["", "seq", ""]>>) -> tensor<1x?x8xf32, #graph.dims<["", "seq", ""]>>
      kernel.yield %r : tensor<1x?x8xf32, #graph.dims<["", "seq", ""]>>
    }
    %v = graph.reshape %b : (tensor<1x?x8xf32, #graph.dims<["", "seq", ""]>>) -> tensor<?x8xf32, #graph.dims<["seq", ""]>>
    func.return %v : tensor<?x8xf32, #graph.dims<["seq", ""]>>
  }
}
