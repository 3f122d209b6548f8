// RUN: gnomon-opt %s --split-input-file --verify-diagnostics | filecheck %s

// One case per message of the rt dialect's verifiers.

func.func @view_count(%x: memref<4x8xf32>) -> memref<16xf32> {
  // CHECK: rt.view: memref<4x8xf32> and memref<16xf32> differ in element count
  %v = rt.view %x : memref<4x8xf32> -> memref<16xf32>
  func.return %v : memref<16xf32>
}

// -----

func.func @view_window(%x: memref<4x8xf32>) -> memref<16xf32> {
  // CHECK: rt.view: elements 24..40 of memref<16xf32> do not lie within memref<4x8xf32>
  %v = rt.view %x [24] : memref<4x8xf32> -> memref<16xf32>
  func.return %v : memref<16xf32>
}

// -----

func.func @view_element_type(%x: memref<4x8xf32>) -> memref<32xi32> {
  // CHECK: rt.view: memref<4x8xf32> and memref<32xi32> differ in element type
  %v = rt.view %x : memref<4x8xf32> -> memref<32xi32>
  func.return %v : memref<32xi32>
}

// -----

func.func @constant_type() -> memref<4xf32> {
  // CHECK: rt.constant: value of type tensor<8xf32> does not fill memref<4xf32>
  %w = rt.constant dense<1.0> : tensor<8xf32> -> memref<4xf32>
  func.return %w : memref<4xf32>
}

// -----

kernel.func @relu_0(%x: tensor<4xf32>) -> tensor<4xf32> attributes {kind = "library", callee = "aten.relu"} {
  %r = graph.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  kernel.yield %r : tensor<4xf32>
}
func.func @launch_shape(%x: memref<8xf32>) {
  %b = rt.buffer 0 : memref<4xf32>
  // CHECK: rt.launch: buffer 0 of @relu_0 is memref<8xf32>, the kernel expects tensor<4xf32>
  rt.launch @relu_0(%x) outs(%b) : (memref<8xf32>) -> (memref<4xf32>)
  func.return
}

// -----

func.func @launch_missing(%x: memref<4xf32>) {
  %b = rt.buffer 0 : memref<4xf32>
  // CHECK: rt.launch: @nothing is not a kernel.func
  rt.launch @nothing(%x) outs(%b) : (memref<4xf32>) -> (memref<4xf32>)
  func.return
}

// -----

func.func @buffer_unnamed() -> memref<?x8xf32> attributes {rt.arena_size = 512 : i64} {
  // CHECK: rt.buffer: dim 0 of memref<?x8xf32> is `?` without a name
  %b = rt.buffer 0 : memref<?x8xf32>
  func.return %b : memref<?x8xf32>
}

// -----

func.func @view_dynamic_count(%x: memref<?x8xf32> {rt.dims = #graph.dims<["seq", ""]>}) -> memref<?x4xf32> {
  // CHECK: rt.view: memref<?x8xf32> and memref<?x4xf32> differ in element count
  %v = rt.view %x dims #graph.dims<["seq", ""]> : memref<?x8xf32> -> memref<?x4xf32>
  func.return %v : memref<?x4xf32>
}

// -----

func.func @view_dynamic_window(%x: memref<?x8xf32> {rt.dims = #graph.dims<["seq", ""]>}) -> memref<?x4xf32> {
  // CHECK: rt.view: a window of memref<?x8xf32> as memref<?x4xf32> has `?` dims; windows are static
  %v = rt.view %x [4] dims #graph.dims<["seq", ""]> : memref<?x8xf32> -> memref<?x4xf32>
  func.return %v : memref<?x4xf32>
}
