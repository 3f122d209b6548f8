// RUN: gnomon-opt %s -p graph-shape-inference | filecheck %s

// `?` result dims are refined from each op's shape rule, in program order, so a refined result
// refines its users in turn; the function signature follows the returned values.

// CHECK-LABEL: func.func @cnn(
// CHECK-SAME:      -> tensor<1x10xf32> {
// CHECK-NEXT:    %{{.*}} = graph.conv {{.*}} -> tensor<1x8x16x16xf32>
// CHECK-NEXT:    %{{.*}} = graph.relu %{{.*}} : (tensor<1x8x16x16xf32>) -> tensor<1x8x16x16xf32>
// CHECK-NEXT:    %{{.*}} = graph.max_pool %{{.*}} {{.*}} : (tensor<1x8x16x16xf32>) -> tensor<1x8x8x8xf32>
// CHECK-NEXT:    %{{.*}} = graph.reshape %{{.*}} : (tensor<1x8x8x8xf32>) -> tensor<1x512xf32>
// CHECK-NEXT:    %{{.*}} = graph.linear %{{.*}}, %{{.*}} : (tensor<1x512xf32>, tensor<10x512xf32>) -> tensor<1x10xf32>
// CHECK-NEXT:    %{{.*}} = graph.softmax %{{.*}} {axis = 1 : i64} : (tensor<1x10xf32>) -> tensor<1x10xf32>
// CHECK-NEXT:    func.return %{{.*}} : tensor<1x10xf32>
func.func @cnn(%x: tensor<1x3x32x32xf32>, %w: tensor<8x3x3x3xf32>, %b: tensor<8xf32>, %fw: tensor<10x512xf32>) -> tensor<?x?xf32> {
  %c = graph.conv %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x32x32xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<?x?x?x?xf32>
  %r = graph.relu %c : (tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  %p = graph.max_pool %r {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<?x?x?x?xf32>) -> tensor<?x8x?x?xf32>
  %f = graph.reshape %p : (tensor<?x8x?x?xf32>) -> tensor<1x?xf32>
  %l = graph.linear %f, %fw : (tensor<1x?xf32>, tensor<10x512xf32>) -> tensor<?x?xf32>
  %s = graph.softmax %l {axis = 1 : i64} : (tensor<?x?xf32>) -> tensor<?x?xf32>
  func.return %s : tensor<?x?xf32>
}

// A dynamic batch stays `?`; every other dim is refined.

// CHECK-LABEL: func.func @dynamic_batch(
// CHECK-SAME:      -> tensor<?x8x8x8xf32> {
// CHECK-NEXT:    %{{.*}} = graph.conv {{.*}} -> tensor<?x8x16x16xf32>
// CHECK-NEXT:    %{{.*}} = graph.avg_pool %{{.*}} {{.*}} : (tensor<?x8x16x16xf32>) -> tensor<?x8x8x8xf32>
// CHECK-NEXT:    func.return %{{.*}} : tensor<?x8x8x8xf32>
func.func @dynamic_batch(%x: tensor<?x3x32x32xf32>, %w: tensor<8x3x3x3xf32>) -> tensor<?x?x?x?xf32> {
  %c = graph.conv %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<?x3x32x32xf32>, tensor<8x3x3x3xf32>) -> tensor<?x?x?x?xf32>
  %p = graph.avg_pool %c {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = false} : (tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32>
  func.return %p : tensor<?x?x?x?xf32>
}

// Broadcasting against a known dim, a contraction over `?` dims, a split with several results and
// a reshape's one `?` dim.

// CHECK-LABEL: func.func @data_movement(
// CHECK-SAME:      -> (tensor<4x16xf32>, tensor<4x1x8xf32>, tensor<12x?xf32>) {
// CHECK-NEXT:    %[[A:.*]] = graph.add %{{.*}}, %{{.*}} : (tensor<?x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    %[[T:.*]] = graph.transpose %{{.*}} {permutation = array<i64: 1, 0>} : (tensor<?x16xf32>) -> tensor<16x?xf32>
// CHECK-NEXT:    %[[M:.*]] = graph.matmul %[[T]], %{{.*}} : (tensor<16x?xf32>, tensor<?x16xf32>) -> tensor<16x16xf32>
// CHECK-NEXT:    %[[P:.*]], %[[Q:.*]] = graph.split %[[M]] {axis = 0 : i64, sizes = array<i64: 4, 12>} : (tensor<16x16xf32>) -> (tensor<4x16xf32>, tensor<12x16xf32>)
// CHECK-NEXT:    %[[E:.*]] = graph.reshape %[[P]] : (tensor<4x16xf32>) -> tensor<4x2x8xf32>
// CHECK-NEXT:    %[[S:.*]] = graph.reduce_sum %[[E]] {axes = array<i64: 1>, keepdims = true} : (tensor<4x2x8xf32>) -> tensor<4x1x8xf32>
// CHECK-NEXT:    %[[C:.*]] = graph.concat %[[Q]], %{{.*}} {axis = 1 : i64} : (tensor<12x16xf32>, tensor<12x?xf32>) -> tensor<12x?xf32>
// CHECK-NEXT:    func.return %[[A]], %[[S]], %[[C]] : tensor<4x16xf32>, tensor<4x1x8xf32>, tensor<12x?xf32>
func.func @data_movement(%x: tensor<?x16xf32>, %y: tensor<4x1xf32>, %z: tensor<12x?xf32>) -> (tensor<?x?xf32>, tensor<?x?x?xf32>, tensor<?x?xf32>) {
  %a = graph.add %x, %y : (tensor<?x16xf32>, tensor<4x1xf32>) -> tensor<?x?xf32>
  %t = graph.transpose %x {permutation = array<i64: 1, 0>} : (tensor<?x16xf32>) -> tensor<?x?xf32>
  %m = graph.matmul %t, %x : (tensor<?x?xf32>, tensor<?x16xf32>) -> tensor<?x?xf32>
  %parts:2 = graph.split %m {axis = 0 : i64, sizes = array<i64: 4, 12>} : (tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>)
  %e = graph.reshape %parts#0 : (tensor<?x?xf32>) -> tensor<4x2x?xf32>
  %s = graph.reduce_sum %e {axes = array<i64: 1>, keepdims = true} : (tensor<4x2x?xf32>) -> tensor<?x?x?xf32>
  %c = graph.concat %parts#1, %z {axis = 1 : i64} : (tensor<?x?xf32>, tensor<12x?xf32>) -> tensor<?x?xf32>
  func.return %a, %s, %c : tensor<?x?xf32>, tensor<?x?x?xf32>, tensor<?x?xf32>
}

// Static results are left as they are.

// CHECK-LABEL: func.func @already_static(
// CHECK-NEXT:    %{{.*}} = graph.gather %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<4x10xf32>, tensor<2x3xi64>) -> tensor<4x2x3xf32>
// CHECK-NEXT:    func.return
func.func @already_static(%x: tensor<4x10xf32>, %i: tensor<2x3xi64>) -> tensor<4x2x3xf32> {
  %g = graph.gather %x, %i {axis = 1 : i64} : (tensor<4x10xf32>, tensor<2x3xi64>) -> tensor<4x2x3xf32>
  func.return %g : tensor<4x2x3xf32>
}

// Named `?` dims (#graph.dims) travel by name: through pass-through dims, broadcasting, a
// permutation and a flatten whose static parts agree; arithmetic on a `?` (a pooled size) drops it.

// CHECK-LABEL: func.func @named_dims(
// CHECK-SAME:    -> tensor<?x10xf32, #graph.dims<["N", ""]>>
func.func @named_dims(%x: tensor<?x3x?x8xf32, #graph.dims<["N", "", "H", ""]>>, %w: tensor<4x3x3x3xf32>, %fc: tensor<10x96xf32>) -> tensor<?x10xf32> {
  // CHECK-NEXT: graph.conv {{.*}} -> tensor<?x4x?x6xf32, #graph.dims<["N", "", "", ""]>>
  %c = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<?x3x?x8xf32, #graph.dims<["N", "", "H", ""]>>, tensor<4x3x3x3xf32>) -> tensor<?x4x?x6xf32>
  // CHECK-NEXT: graph.relu {{.*}} -> tensor<?x4x?x6xf32, #graph.dims<["N", "", "", ""]>>
  %r = graph.relu %c : (tensor<?x4x?x6xf32>) -> tensor<?x4x?x6xf32>
  // CHECK-NEXT: graph.transpose {{.*}} -> tensor<4x?x?x6xf32, #graph.dims<["", "N", "", ""]>>
  %t = graph.transpose %r {permutation = array<i64: 1, 0, 2, 3>} : (tensor<?x4x?x6xf32>) -> tensor<4x?x?x6xf32>
  // CHECK-NEXT: graph.adaptive_avg_pool {{.*}} -> tensor<?x4x4x6xf32, #graph.dims<["N", "", "", ""]>>
  %p = graph.adaptive_avg_pool %r {output_size = array<i64: 4, 6>} : (tensor<?x4x?x6xf32>) -> tensor<?x4x4x6xf32>
  // CHECK-NEXT: graph.reshape {{.*}} -> tensor<?x96xf32, #graph.dims<["N", ""]>>
  %f = graph.reshape %p : (tensor<?x4x4x6xf32>) -> tensor<?x96xf32>
  // CHECK-NEXT: graph.linear {{.*}} -> tensor<?x10xf32, #graph.dims<["N", ""]>>
  %y = graph.linear %f, %fc : (tensor<?x96xf32>, tensor<10x96xf32>) -> tensor<?x10xf32>
  // CHECK-NEXT: func.return {{.*}} : tensor<?x10xf32, #graph.dims<["N", ""]>>
  func.return %y : tensor<?x10xf32>
}

// Derived dynamic dims are named after the dims they come from, so that the runtime can size them: a view of
// [2, seq, 64] as [?, 64] holds `2*seq` rows, and back as [2, ?, 64] `seq` again; a cache of `past` positions grown
// by one step has `past+1`.

// CHECK-LABEL: func.func @derived_names(
// CHECK:         graph.reshape %x : ({{.*}}) -> tensor<?x64xf32, #graph.dims<["2*seq", ""]>>
// CHECK:         graph.reshape %{{.*}} : ({{.*}}) -> tensor<2x?x64xf32, #graph.dims<["", "seq", ""]>>
// CHECK:         graph.concat %k, %new {{.*}} -> tensor<1x?x16xf32, #graph.dims<["", "past+1", ""]>>
func.func @derived_names(%x: tensor<2x?x64xf32, #graph.dims<["", "seq", ""]>>, %k: tensor<1x?x16xf32, #graph.dims<["", "past", ""]>>, %new: tensor<1x1x16xf32>) -> (tensor<2x?x64xf32>, tensor<1x?x16xf32>) {
  %flat = graph.reshape %x : (tensor<2x?x64xf32, #graph.dims<["", "seq", ""]>>) -> tensor<?x64xf32>
  %back = graph.reshape %flat : (tensor<?x64xf32>) -> tensor<2x?x64xf32>
  %grown = graph.concat %k, %new {axis = 1 : i64} : (tensor<1x?x16xf32, #graph.dims<["", "past", ""]>>, tensor<1x1x16xf32>) -> tensor<1x?x16xf32>
  func.return %back, %grown : tensor<2x?x64xf32>, tensor<1x?x16xf32>
}
