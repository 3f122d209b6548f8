// A TorchScript file and a torch.export file of the same CNN import to the same graph program, line for line; the
// exported program also says how many nn.Module calls an eager run makes (a TorchScript module makes none).
// RUN: %python %S/Inputs/make_torch.py SmallCNN %t.pt %t.pt2
// RUN: gnomon import %t.pt --input-shape x=2x3x32x32 --elide-weights | filecheck %s
// RUN: gnomon import %t.pt2 --elide-weights | filecheck %s

// CHECK:      builtin.module attributes {gnomon.source = "{{.*}}.pt{{2?}}", gnomon.input_names = ["x"], gnomon.output_names = ["output_0"]{{(, gnomon.module_calls = 17 : i64)?}}} {
// CHECK-NEXT:   func.func @main(%[[X:.*]]: tensor<2x3x32x32xf32>) -> tensor<2x10xf32> {
// CHECK-NEXT:     %[[HEAD_B:.*]] = graph.constant {value = dense_resource<__elided__> : tensor<10xf32>} : () -> tensor<10xf32>
// CHECK-NEXT:     %[[HEAD_W:.*]] = graph.constant {{.*}} : () -> tensor<10x64xf32>
// CHECK-NEXT:     %[[POINT_B:.*]] = graph.constant {{.*}} : () -> tensor<64xf32>
// CHECK-NEXT:     %[[POINT_W:.*]] = graph.constant {{.*}} : () -> tensor<64x32x1x1xf32>
// CHECK-NEXT:     %[[BN3_VAR:.*]] = graph.constant {{.*}} : () -> tensor<32xf32>
// CHECK-NEXT:     %[[BN3_MEAN:.*]] = graph.constant {{.*}} : () -> tensor<32xf32>
// CHECK-NEXT:     %[[BN3_BIAS:.*]] = graph.constant {{.*}} : () -> tensor<32xf32>
// CHECK-NEXT:     %[[BN3_SCALE:.*]] = graph.constant {{.*}} : () -> tensor<32xf32>
// CHECK-NEXT:     %[[DEPTH_W:.*]] = graph.constant {{.*}} : () -> tensor<32x1x3x3xf32>
// CHECK-NEXT:     %[[BN2_VAR:.*]] = graph.constant {{.*}} : () -> tensor<32xf32>
// CHECK-NEXT:     %[[BN2_MEAN:.*]] = graph.constant {{.*}} : () -> tensor<32xf32>
// CHECK-NEXT:     %[[BN2_BIAS:.*]] = graph.constant {{.*}} : () -> tensor<32xf32>
// CHECK-NEXT:     %[[BN2_SCALE:.*]] = graph.constant {{.*}} : () -> tensor<32xf32>
// CHECK-NEXT:     %[[BLOCK_W:.*]] = graph.constant {{.*}} : () -> tensor<32x16x3x3xf32>
// CHECK-NEXT:     %[[BN1_VAR:.*]] = graph.constant {{.*}} : () -> tensor<16xf32>
// CHECK-NEXT:     %[[BN1_MEAN:.*]] = graph.constant {{.*}} : () -> tensor<16xf32>
// CHECK-NEXT:     %[[BN1_BIAS:.*]] = graph.constant {{.*}} : () -> tensor<16xf32>
// CHECK-NEXT:     %[[BN1_SCALE:.*]] = graph.constant {{.*}} : () -> tensor<16xf32>
// CHECK-NEXT:     %[[STEM_W:.*]] = graph.constant {{.*}} : () -> tensor<16x3x3x3xf32>
// CHECK-NEXT:     %[[STEM:.*]] = graph.conv %[[X]], %[[STEM_W]] {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x32x32xf32>, tensor<16x3x3x3xf32>) -> tensor<2x16x32x32xf32>
// CHECK-NEXT:     %[[BN1:.*]] = graph.batch_norm %[[STEM]], %[[BN1_SCALE]], %[[BN1_BIAS]], %[[BN1_MEAN]], %[[BN1_VAR]] {epsilon = 1.000000e-05 : f64} : (tensor<2x16x32x32xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x16x32x32xf32>
// CHECK-NEXT:     %[[RELU1:.*]] = graph.relu %[[BN1]] : (tensor<2x16x32x32xf32>) -> tensor<2x16x32x32xf32>
// CHECK-NEXT:     %[[POOL:.*]] = graph.max_pool %[[RELU1]] {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<2x16x32x32xf32>) -> tensor<2x16x16x16xf32>
// CHECK-NEXT:     %[[BLOCK:.*]] = graph.conv %[[POOL]], %[[BLOCK_W]] {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x16x16x16xf32>, tensor<32x16x3x3xf32>) -> tensor<2x32x8x8xf32>
// CHECK-NEXT:     %[[BN2:.*]] = graph.batch_norm %[[BLOCK]], %[[BN2_SCALE]], %[[BN2_BIAS]], %[[BN2_MEAN]], %[[BN2_VAR]] {epsilon = 1.000000e-05 : f64} : (tensor<2x32x8x8xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x32x8x8xf32>
// CHECK-NEXT:     %[[RELU2:.*]] = graph.relu %[[BN2]] : (tensor<2x32x8x8xf32>) -> tensor<2x32x8x8xf32>
// CHECK-NEXT:     %[[DEPTH:.*]] = graph.conv %[[RELU2]], %[[DEPTH_W]] {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 32 : i64} : (tensor<2x32x8x8xf32>, tensor<32x1x3x3xf32>) -> tensor<2x32x8x8xf32>
// CHECK-NEXT:     %[[BN3:.*]] = graph.batch_norm %[[DEPTH]], %[[BN3_SCALE]], %[[BN3_BIAS]], %[[BN3_MEAN]], %[[BN3_VAR]] {epsilon = 1.000000e-05 : f64} : (tensor<2x32x8x8xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x32x8x8xf32>
// CHECK-NEXT:     %[[RELU3:.*]] = graph.relu %[[BN3]] : (tensor<2x32x8x8xf32>) -> tensor<2x32x8x8xf32>
// CHECK-NEXT:     %[[POINT:.*]] = graph.conv %[[RELU3]], %[[POINT_W]], %[[POINT_B]] {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x32x8x8xf32>, tensor<64x32x1x1xf32>, tensor<64xf32>) -> tensor<2x64x8x8xf32>
// CHECK-NEXT:     %[[RELU4:.*]] = graph.relu %[[POINT]] : (tensor<2x64x8x8xf32>) -> tensor<2x64x8x8xf32>
// CHECK-NEXT:     %[[GAP:.*]] = graph.global_avg_pool %[[RELU4]] : (tensor<2x64x8x8xf32>) -> tensor<2x64x1x1xf32>
// CHECK-NEXT:     %[[FLAT:.*]] = graph.reshape %[[GAP]] : (tensor<2x64x1x1xf32>) -> tensor<2x64xf32>
// CHECK-NEXT:     %[[HEAD:.*]] = graph.linear %[[FLAT]], %[[HEAD_W]], %[[HEAD_B]] : (tensor<2x64xf32>, tensor<10x64xf32>, tensor<10xf32>) -> tensor<2x10xf32>
// CHECK-NEXT:     func.return %[[HEAD]] : tensor<2x10xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
