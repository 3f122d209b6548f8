// A small ONNX model imports into graph ops named after their nodes; Gemm becomes graph.linear.
// RUN: %python %S/Inputs/make_onnx.py conv_block %t.onnx
// RUN: gnomon import %t.onnx --elide-weights | filecheck %s
// RUN: gnomon import %t.onnx -o %t.mlir && gnomon-opt %t.mlir | filecheck %s --check-prefix=SELF-CONTAINED

// CHECK:      func.func @conv_block(%{{.*}}: tensor<1x3x16x16xf32>) -> tensor<1x10xf32>
// CHECK:      graph.conv %{{.*}}, %{{.*}}, %{{.*}} {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x16x16xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<1x8x8x8xf32>
// CHECK-NEXT: graph.relu %{{.*}} : (tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
// CHECK-NEXT: graph.global_avg_pool %{{.*}} : (tensor<1x8x8x8xf32>) -> tensor<1x8x1x1xf32>
// CHECK-NEXT: graph.reshape %{{.*}} : (tensor<1x8x1x1xf32>) -> tensor<1x8xf32>
// CHECK-NEXT: graph.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x8xf32>, tensor<10x8xf32>, tensor<10xf32>) -> tensor<1x10xf32>
// CHECK-NEXT: func.return

// The written file carries its weights as dense_resource blobs and parses on its own.
// SELF-CONTAINED: graph.constant {value = dense_resource<{{.*}}> : tensor<8x3x3x3xf32>}
// SELF-CONTAINED: dialect_resources
