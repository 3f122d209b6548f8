// RUN: gnomon-opt %s -p kernel-to-linalg | filecheck %s

// add + relu with a broadcast bias: one generic, the bias read through (d0, d1) -> (d1); this
// part's rows are a subview of the input and output.

// CHECK-LABEL: func.func @add_relu_0(
// CHECK-SAME:      %[[X:[^:]*]]: memref<4x8xf32>, %[[B:[^:]*]]: memref<8xf32>, %[[Y:[^:]*]]: memref<4x8xf32>, %[[PART:[^:]*]]: index, %[[PARTS:[^:]*]]: index)
// CHECK-SAME:      attributes {llvm.emit_c_interface}
// CHECK:         %[[BEGIN:.*]] = arith.divui %{{.*}}, %[[PARTS]] : index
// CHECK:         %[[XV:.*]] = memref.subview %[[X]][%[[BEGIN]], 0] [%{{.*}}, 8] [1, 1] : memref<4x8xf32> to memref<?x8xf32, strided<[8, 1], offset: ?>>
// CHECK-NEXT:    %[[YV:.*]] = memref.subview %[[Y]][%[[BEGIN]], 0] [%{{.*}}, 8] [1, 1]
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%[[XV]], %[[B]] : {{.*}}) outs(%[[YV]] : {{.*}}) {
// CHECK-NEXT:    ^{{.*}}(%[[XE:.*]]: f32, %[[BE:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[XE]], %[[BE]] : f32
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[R:.*]] = arith.maximumf %[[S]], %[[ZERO]] : f32
// CHECK-NEXT:      linalg.yield %[[R]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
kernel.func @add_relu_0(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [0, 1], threads = 2>} {
  %s = graph.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = graph.relu %s : (tensor<4x8xf32>) -> tensor<4x8xf32>
  kernel.yield %r : tensor<4x8xf32>
}

// Operands that are all contiguous collapse to one loop; the scalar operand is read at ().

// CHECK-LABEL: func.func @mul_sub_1(
// CHECK:         memref.collapse_shape %{{.*}} {{\[}}[0 : i64, 1 : i64, 2 : i64, 3 : i64]] : memref<1x64x56x56xf32> into memref<200704xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
// CHECK-NEXT:    ^{{.*}}(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[C:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.subf %[[M]], %[[C]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
kernel.func @mul_sub_1(%a: tensor<1x64x56x56xf32>, %b: tensor<1x64x56x56xf32>, %c: tensor<f32>) -> tensor<1x64x56x56xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0, 0, 0], vector = 8, order = [0, 1, 2, 3], threads = 2>} {
  %m = graph.mul %a, %b : (tensor<1x64x56x56xf32>, tensor<1x64x56x56xf32>) -> tensor<1x64x56x56xf32>
  %s = graph.sub %m, %c : (tensor<1x64x56x56xf32>, tensor<f32>) -> tensor<1x64x56x56xf32>
  kernel.yield %s : tensor<1x64x56x56xf32>
}

// A transpose tiled 16 x 16: a loop over this part's row tiles, one over column tiles, and the
// generic on one tile reads the input at (d1, d0).

// CHECK-LABEL: func.func @transpose_2(
// CHECK-SAME:      %[[X:[^:]*]]: memref<64x32xf32>, %[[Y:[^:]*]]: memref<32x64xf32>
// CHECK:         scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:             %[[XV:.*]] = memref.subview %[[X]][%[[J]], %[[I]]] [%{{.*}}, %{{.*}}] [1, 1] : memref<64x32xf32> to memref<?x?xf32, strided<[32, 1], offset: ?>>
// CHECK-NEXT:        %[[YV:.*]] = memref.subview %[[Y]][%[[I]], %[[J]]] [%{{.*}}, %{{.*}}] [1, 1] : memref<32x64xf32> to memref<?x?xf32, strided<[64, 1], offset: ?>>
// CHECK-NEXT:        linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%[[XV]] : {{.*}}) outs(%[[YV]] : {{.*}}) {
// CHECK-NEXT:        ^{{.*}}(%[[E:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:          linalg.yield %[[E]] : f32
kernel.func @transpose_2(%x: tensor<64x32xf32>) -> tensor<32x64xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [16, 16], vector = 8, order = [0, 1], threads = 2>} {
  %t = graph.transpose %x {permutation = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
  kernel.yield %t : tensor<32x64xf32>
}

// A loop order [1, 0] makes output dim 1 the outer loop: the output is written through (d1, d0).

// CHECK-LABEL: func.func @exp_3(
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d1, d0)>], iterator_types = ["parallel", "parallel"]}
kernel.func @exp_3(%x: tensor<4x8xf64>) -> tensor<4x8xf64> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [1, 0], threads = 2>} {
  %e = graph.exp %x : (tensor<4x8xf64>) -> tensor<4x8xf64>
  kernel.yield %e : tensor<4x8xf64>
}

// A matmul is a vector micro-kernel over a packed panel of B; its epilogue a generic over its rows.

// CHECK-LABEL: func.func @matmul_add_4(
// CHECK:         memref.alloca() {alignment = 64 : i64} : memref<32x16xf32>
// CHECK:         vector.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-NEXT:    ^{{.*}}(%[[C:.*]]: f32, %[[BIAS:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[C]], %[[BIAS]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
kernel.func @matmul_add_4(%a: tensor<12x32xf32>, %b: tensor<32x16xf32>, %bias: tensor<16xf32>) -> tensor<12x16xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [0, 1], threads = 2>} {
  %c = graph.matmul %a, %b : (tensor<12x32xf32>, tensor<32x16xf32>) -> tensor<12x16xf32>
  %s = graph.add %c, %bias : (tensor<12x16xf32>, tensor<16xf32>) -> tensor<12x16xf32>
  kernel.yield %s : tensor<12x16xf32>
}

// A mean over the last axis: this part's rows are set to 0, a generic with a reduction loop sums
// them (reassociable, so LLVM vectorizes it), and a pointwise generic divides in place.

// CHECK-LABEL: func.func @reduce_mean_5(
// CHECK-SAME:      %[[X:[^:]*]]: memref<4x8xf32>, %[[Y:[^:]*]]: memref<4xf32>
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%{{.*}} : {{.*}}) {
// CHECK-NEXT:    ^{{.*}}(%{{.*}}: f32):
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      linalg.yield %[[ZERO]] : f32
// CHECK:         %[[XV:.*]] = memref.subview %[[X]]
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%[[XV]] : {{.*}}) outs(%{{.*}} : {{.*}}) {
// CHECK-NEXT:    ^{{.*}}(%[[E:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[ACC]], %[[E]] fastmath<reassoc> : f32
// CHECK-NEXT:      linalg.yield %[[SUM]] : f32
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
// CHECK-NEXT:    ^{{.*}}(%[[S:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[N:.*]] = arith.constant 8.000000e+00 : f32
// CHECK-NEXT:      %[[M:.*]] = arith.divf %[[S]], %[[N]] : f32
// CHECK-NEXT:      linalg.yield %[[M]] : f32
kernel.func @reduce_mean_5(%x: tensor<4x8xf32>) -> tensor<4xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0], vector = 8, order = [0], threads = 2>} {
  %m = graph.reduce_mean %x {axes = array<i64: 1>, keepdims = false} : (tensor<4x8xf32>) -> tensor<4xf32>
  kernel.yield %m : tensor<4xf32>
}

// A softmax: each row's max, then its sum of exponentials, into buffers of one element per row;
// the last generic normalizes, reading both through (d0, d1) -> (d0).

// CHECK-LABEL: func.func @softmax_6(
// CHECK:         %[[MAX:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK-NEXT:    %[[SUM:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK:         arith.maximumf
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK:           arith.divf
// CHECK:         memref.dealloc %[[MAX]] : memref<4xf32>
// CHECK-NEXT:    memref.dealloc %[[SUM]] : memref<4xf32>
kernel.func @softmax_6(%x: tensor<4x10xf32>) -> tensor<4x10xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [0, 1], threads = 2>} {
  %s = graph.softmax %x {axis = 1 : i64} : (tensor<4x10xf32>) -> tensor<4x10xf32>
  kernel.yield %s : tensor<4x10xf32>
}

// Library kernels are left alone.

// CHECK-LABEL: kernel.func @conv_7(
// CHECK-SAME:      attributes {kind = "library", callee = "aten.convolution"}
kernel.func @conv_7(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> attributes {kind = "library", callee = "aten.convolution"} {
  %c = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  kernel.yield %c : tensor<1x4x6x6xf32>
}

// A 1x1 convolution and the depthwise convolution after it, one kernel: the producer's register block is a
// K-loop of broadcast FMAs over 16-channel vectors (its bias starts the accumulators), its rows go to a line
// buffer, the depthwise row reads it with vector FMAs, and the rows are stored back to NCHW as 8x8 tiles
// transposed by shuffles (the 12 columns here: one whole tile, then one with a masked store of 4).

// CHECK-LABEL: func.func @conv_relu_conv_0(
// CHECK-SAME:      %{{[^:]*}}: memref<1x8x12x12xf32>, %{{[^:]*}}: memref<16x8x1x1xf32>, %{{[^:]*}}: memref<16xf32>, %{{[^:]*}}: memref<16x1x3x3xf32>, %{{[^:]*}}: memref<1x16x12x12xf32>, %{{[^:]*}}: index, %{{[^:]*}}: index)
// CHECK:         scf.for
// CHECK:           vector.broadcast %{{.*}} : f32 to vector<16xf32>
// CHECK-NEXT:      vector.fma
// CHECK:           arith.maximumf
// CHECK:           vector.fma
// CHECK:           vector.shuffle
// CHECK:           vector.store %{{.*}} : memref<1x16x12x12xf32>, vector<8xf32>
// CHECK:           vector.create_mask
// CHECK:           vector.maskedstore
kernel.func @conv_relu_conv_0(%x: tensor<1x8x12x12xf32>, %w: tensor<16x8x1x1xf32>, %b: tensor<16xf32>, %d: tensor<16x1x3x3xf32>) -> tensor<1x16x12x12xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [], vector = 16, order = [], threads = 2>} {
  %c = graph.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x8x12x12xf32>, tensor<16x8x1x1xf32>, tensor<16xf32>) -> tensor<1x16x12x12xf32>
  %r = graph.relu %c : (tensor<1x16x12x12xf32>) -> tensor<1x16x12x12xf32>
  %e = graph.conv %r, %d {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 16 : i64} : (tensor<1x16x12x12xf32>, tensor<16x1x3x3xf32>) -> tensor<1x16x12x12xf32>
  kernel.yield %e : tensor<1x16x12x12xf32>
}

// A `?` dim: one function for every size. The rows are read from the input's descriptor (memref.dim) and split
// between the parts at run time.

// CHECK-LABEL: func.func @add_relu_dynamic(
// CHECK-SAME:      %[[X:[^:]*]]: memref<?x8xf32>, %{{[^:]*}}: memref<8xf32>, %[[Y:[^:]*]]: memref<?x8xf32>, %[[PART:[^:]*]]: index, %[[PARTS:[^:]*]]: index)
// CHECK:         %[[ROWS:.*]] = memref.dim %[[X]], %{{.*}} : memref<?x8xf32>
// CHECK-NEXT:    %[[FIRST:.*]] = arith.muli %[[ROWS]], %[[PART]] : index
// CHECK-NEXT:    %[[BEGIN:.*]] = arith.divui %[[FIRST]], %[[PARTS]] : index
// CHECK:         %[[XV:.*]] = memref.subview %[[X]][%[[BEGIN]], 0] [%{{.*}}, 8] [1, 1] : memref<?x8xf32> to memref<?x8xf32, strided<[8, 1], offset: ?>>
// CHECK-NEXT:    %[[YV:.*]] = memref.subview %[[Y]][%[[BEGIN]], 0] [%{{.*}}, 8] [1, 1]
// CHECK-NEXT:    linalg.generic
kernel.func @add_relu_dynamic(%x: tensor<?x8xf32>, %b: tensor<8xf32>) -> tensor<?x8xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [0, 1], threads = 2>} {
  %s = graph.add %x, %b : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %r = graph.relu %s : (tensor<?x8xf32>) -> tensor<?x8xf32>
  kernel.yield %r : tensor<?x8xf32>
}
