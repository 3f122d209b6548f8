// RUN: gnomon-opt %s | gnomon-opt | filecheck %s
// RUN: GNOMON_ROUNDTRIP

// The kernel ops in their custom forms: an inline generated kernel with its schedule, inline
// library kernels (with a fused epilogue, with a transposed operand), and an outlined kernel.func
// of each kind.

// CHECK-LABEL: func.func @inline_kernels(
func.func @inline_kernels(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %{{.*}} = kernel.generated "add_relu_0"(%{{.*}}, %{{.*}}) schedule <tile = [0, 32], vector = 8, order = [0, 1], threads = 2> : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: ^{{.*}}(%[[X:.*]]: tensor<4x8xf32>, %[[Y:.*]]: tensor<8xf32>):
  // CHECK-NEXT:   %[[S:.*]] = graph.add %[[X]], %[[Y]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT:   %[[R:.*]] = graph.relu %[[S]] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT:   kernel.yield %[[R]] : tensor<4x8xf32>
  // CHECK-NEXT: }
  %y = kernel.generated "add_relu_0" (%a, %b) schedule <tile = [0, 32], vector = 8, order = [0, 1], threads = 2> : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: tensor<4x8xf32>, %z: tensor<8xf32>):
    %s = graph.add %x, %z : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r = graph.relu %s : (tensor<4x8xf32>) -> tensor<4x8xf32>
    kernel.yield %r : tensor<4x8xf32>
  }
  // CHECK-NEXT: %{{.*}} = kernel.library "aten.softmax"(%{{.*}}) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK:        graph.softmax
  // CHECK:        kernel.yield
  %l = kernel.library "aten.softmax" (%y) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: tensor<4x8xf32>):
    %r = graph.softmax %x {axis = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    kernel.yield %r : tensor<4x8xf32>
  }
  func.return %l : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @library_calls(
func.func @library_calls(%x: tensor<2x8xf32>, %w: tensor<5x8xf32>, %b: tensor<5xf32>, %z: tensor<4x3x8xf32>) -> (tensor<2x5xf32>, tensor<4x3x3xf32>) {
  // CHECK-NEXT: %{{.*}} = kernel.library "aten.linear" epilogue ["add", "gelu"](%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<2x8xf32>, tensor<5x8xf32>, tensor<5xf32>) -> tensor<2x5xf32> {
  // CHECK-NEXT: ^{{.*}}(%[[X:.*]]: tensor<2x8xf32>, %[[W:.*]]: tensor<5x8xf32>, %[[B:.*]]: tensor<5xf32>):
  // CHECK-NEXT:   %[[L:.*]] = graph.linear %[[X]], %[[W]] : (tensor<2x8xf32>, tensor<5x8xf32>) -> tensor<2x5xf32>
  // CHECK-NEXT:   %[[S:.*]] = graph.add %[[L]], %[[B]] : (tensor<2x5xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  // CHECK-NEXT:   %[[G:.*]] = graph.gelu %[[S]] {approximate = "none"} : (tensor<2x5xf32>) -> tensor<2x5xf32>
  // CHECK-NEXT:   kernel.yield %[[G]] : tensor<2x5xf32>
  // CHECK-NEXT: }
  %y = kernel.library "aten.linear" epilogue ["add", "gelu"] (%x, %w, %b) : (tensor<2x8xf32>, tensor<5x8xf32>, tensor<5xf32>) -> tensor<2x5xf32> {
  ^bb0(%a: tensor<2x8xf32>, %m: tensor<5x8xf32>, %c: tensor<5xf32>):
    %l = graph.linear %a, %m : (tensor<2x8xf32>, tensor<5x8xf32>) -> tensor<2x5xf32>
    %s = graph.add %l, %c : (tensor<2x5xf32>, tensor<5xf32>) -> tensor<2x5xf32>
    %g = graph.gelu %s {approximate = "none"} : (tensor<2x5xf32>) -> tensor<2x5xf32>
    kernel.yield %g : tensor<2x5xf32>
  }
  // CHECK-NEXT: %{{.*}} = kernel.library "aten.matmul" transposed [1](%{{.*}}) : (tensor<4x3x8xf32>) -> tensor<4x3x3xf32> {
  // CHECK-NEXT: ^{{.*}}(%[[Z:.*]]: tensor<4x3x8xf32>):
  // CHECK-NEXT:   %[[T:.*]] = graph.transpose %[[Z]] {permutation = array<i64: 0, 2, 1>} : (tensor<4x3x8xf32>) -> tensor<4x8x3xf32>
  // CHECK-NEXT:   %[[M:.*]] = graph.matmul %[[Z]], %[[T]] : (tensor<4x3x8xf32>, tensor<4x8x3xf32>) -> tensor<4x3x3xf32>
  // CHECK-NEXT:   kernel.yield %[[M]] : tensor<4x3x3xf32>
  // CHECK-NEXT: }
  %d = kernel.library "aten.matmul" transposed [1] (%z) : (tensor<4x3x8xf32>) -> tensor<4x3x3xf32> {
  ^bb0(%a: tensor<4x3x8xf32>):
    %t = graph.transpose %a {permutation = array<i64: 0, 2, 1>} : (tensor<4x3x8xf32>) -> tensor<4x8x3xf32>
    %m = graph.matmul %a, %t : (tensor<4x3x8xf32>, tensor<4x8x3xf32>) -> tensor<4x3x3xf32>
    kernel.yield %m : tensor<4x3x3xf32>
  }
  func.return %y, %d : tensor<2x5xf32>, tensor<4x3x3xf32>
}

// CHECK-LABEL: kernel.func @relu_1(%{{.*}}: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [1, 0], threads = 1>} {
kernel.func @relu_1(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [1, 0], threads = 1>} {
  %r = graph.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  kernel.yield %r : tensor<4x8xf32>
}

// CHECK-LABEL: kernel.func @matmul_2(%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<8x2xf32>) -> tensor<4x2xf32> attributes {kind = "library", callee = "aten.mm"} {
kernel.func @matmul_2(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> tensor<4x2xf32> attributes {kind = "library", callee = "aten.mm"} {
  %r = graph.matmul %x, %w : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  kernel.yield %r : tensor<4x2xf32>
}

// CHECK-LABEL: kernel.func @conv_relu_3(%{{.*}}: tensor<1x3x4x4xf32>, %{{.*}}: tensor<2x3x1x1xf32>, %{{.*}}: tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32> attributes {kind = "library", callee = "aten.mm", epilogue = ["add", "relu"]} {
kernel.func @conv_relu_3(%x: tensor<1x3x4x4xf32>, %w: tensor<2x3x1x1xf32>, %b: tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32> attributes {kind = "library", callee = "aten.mm", epilogue = ["add", "relu"]} {
  %c = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x4x4xf32>, tensor<2x3x1x1xf32>) -> tensor<1x2x4x4xf32>
  %s = graph.add %c, %b : (tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %r = graph.relu %s : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  kernel.yield %r : tensor<1x2x4x4xf32>
}

// CHECK-LABEL: kernel.func @matmul_4(%{{.*}}: tensor<8x3xf32>, %{{.*}}: tensor<8x2xf32>) -> tensor<3x2xf32> attributes {kind = "library", callee = "aten.matmul", transposed = array<i64: 0>} {
kernel.func @matmul_4(%a: tensor<8x3xf32>, %w: tensor<8x2xf32>) -> tensor<3x2xf32> attributes {kind = "library", callee = "aten.matmul", transposed = array<i64: 0>} {
  %t = graph.transpose %a {permutation = array<i64: 1, 0>} : (tensor<8x3xf32>) -> tensor<3x8xf32>
  %r = graph.matmul %t, %w : (tensor<3x8xf32>, tensor<8x2xf32>) -> tensor<3x2xf32>
  kernel.yield %r : tensor<3x2xf32>
}
