// An ONNX dim_param names its `?` dim, and the name travels to the outputs; --input-shape fixes it.
// RUN: %python %S/Inputs/make_onnx.py dynamic_batch %t.onnx
// RUN: gnomon import %t.onnx --elide-weights | filecheck %s
// RUN: gnomon import %t.onnx --elide-weights --input-shape x=4x3x16x16 | filecheck %s --check-prefix=STATIC

// CHECK:      func.func @conv_block(%{{.*}}: tensor<?x3x16x16xf32, #graph.dims<["N", "", "", ""]>>) -> tensor<?x10xf32, #graph.dims<["N", ""]>>
// CHECK:      graph.conv {{.*}} -> tensor<?x8x8x8xf32, #graph.dims<["N", "", "", ""]>>
// CHECK:      graph.reshape {{.*}} -> tensor<?x8xf32, #graph.dims<["N", ""]>>
// CHECK-NEXT: graph.linear {{.*}} -> tensor<?x10xf32, #graph.dims<["N", ""]>>

// STATIC:     func.func @conv_block(%{{.*}}: tensor<4x3x16x16xf32>) -> tensor<4x10xf32>
