// A TorchScript file and a torch.export file of the same CNN import to the same graph ops.
// RUN: %python %S/Inputs/make_torch.py SmallCNN script %t.pt
// RUN: gnomon import %t.pt --input-shape x=2x3x32x32 --elide-weights | filecheck %s
// RUN: %python %S/Inputs/make_torch.py SmallCNN export %t.pt2
// RUN: gnomon import %t.pt2 --elide-weights | filecheck %s

// CHECK:     func.func @main(%{{.*}}: tensor<2x3x32x32xf32>) -> tensor<2x10xf32>
// CHECK:     graph.conv
// CHECK:     graph.batch_norm
// CHECK:     graph.relu
// CHECK:     graph.conv {{.*}}groups = 32 : i64
// CHECK:     graph.linear
// CHECK-NOT: torch.
