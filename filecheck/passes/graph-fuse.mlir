// RUN: gnomon-opt %s -p 'graph-fuse{device=generic-cpu threads=2}' | filecheck %s
// RUN: gnomon-opt %s -p 'graph-fuse{device=generic-cpu threads=2},graph-to-kernel{threads=2}' | filecheck %s --check-prefix=KERNEL

// Every legal join is priced on the device: the open kernel and the candidate as two launches against one
// kernel that holds both. A convolution's bias add and relu ride in its library call.

// CHECK-LABEL: func.func @conv_relu(
// CHECK:         %[[C:.*]] = graph.conv {{.*}}gnomon.fusion = {group = 0 : i64, kind = "anchor"}
// CHECK-NEXT:    %{{.*}} = graph.relu %[[C]] {gnomon.fusion = {group = 0 : i64, decision = "fuse", separate_s = {{.*}} : f64, fused_s = {{.*}} : f64}}
// KERNEL-LABEL: func.func @conv_relu(
// KERNEL:         kernel.library "aten.convolution" epilogue ["relu"]
// KERNEL-NOT:     gnomon.fusion
func.func @conv_relu(%x: tensor<1x16x32x32xf32>) -> tensor<1x16x32x32xf32> {
  %w = graph.constant {value = dense<0.5> : tensor<16x16x3x3xf32>} : () -> tensor<16x16x3x3xf32>
  %c = graph.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x16x32x32xf32>, tensor<16x16x3x3xf32>) -> tensor<1x16x32x32xf32>
  %y = graph.relu %c : (tensor<1x16x32x32xf32>) -> tensor<1x16x32x32xf32>
  func.return %y : tensor<1x16x32x32xf32>
}

// Elementwise ops on one shape: the intermediate stays in registers and one launch is saved.

// CHECK-LABEL: func.func @chain(
// CHECK:         graph.add {{.*}}gnomon.fusion = {group = 0 : i64, kind = "generated"}
// CHECK-NEXT:    graph.tanh {{.*}}gnomon.fusion = {group = 0 : i64, decision = "fuse", separate_s = {{.*}}, fused_s = {{.*}}}
// CHECK-NEXT:    graph.mul {{.*}}gnomon.fusion = {group = 0 : i64, decision = "fuse", separate_s = {{.*}}, fused_s = {{.*}}}
// KERNEL-LABEL: func.func @chain(
// KERNEL-NEXT:    kernel.generated "add_tanh_mul_0"
func.func @chain(%x: tensor<64x256xf32>, %b: tensor<256xf32>) -> tensor<64x256xf32> {
  %s = graph.add %x, %b : (tensor<64x256xf32>, tensor<256xf32>) -> tensor<64x256xf32>
  %t = graph.tanh %s : (tensor<64x256xf32>) -> tensor<64x256xf32>
  %m = graph.mul %t, %x : (tensor<64x256xf32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  func.return %m : tensor<64x256xf32>
}

// A reduction can be generated or called from the library: both are priced over the same ops (here with the
// scale after it, which the generated kernel takes and the library call leaves to a kernel of its own). Its
// kernel may return to the input's shape (the add reads each row's sum). A softmax goes to the library, as
// graph-to-kernel sends it: the model does not yet price its generated form.

// CHECK-LABEL: func.func @reduce_scale(
// CHECK:         graph.reduce_sum {{.*}}gnomon.fusion = {group = 0 : i64, kind = "{{generated|single}}", generated_s = {{.*}} : f64, library_s = {{.*}} : f64}
// CHECK:         graph.add {{.*}}gnomon.fusion = {group = 0 : i64, decision = "fuse", {{.*}}}
// CHECK-NEXT:    graph.softmax {{.*}}gnomon.fusion = {group = 1 : i64, kind = "single"}
func.func @reduce_scale(%x: tensor<8x128x128xf32>) -> tensor<8x128x128xf32> {
  %s = graph.reduce_sum %x {axes = array<i64: -1>, keepdims = true} : (tensor<8x128x128xf32>) -> tensor<8x128x1xf32>
  %c = graph.constant {value = dense<2.0> : tensor<f32>} : () -> tensor<f32>
  %m = graph.mul %s, %c : (tensor<8x128x1xf32>, tensor<f32>) -> tensor<8x128x1xf32>
  %a = graph.add %x, %m : (tensor<8x128x128xf32>, tensor<8x128x1xf32>) -> tensor<8x128x128xf32>
  %p = graph.softmax %a {axis = -1 : i64} : (tensor<8x128x128xf32>) -> tensor<8x128x128xf32>
  func.return %p : tensor<8x128x128xf32>
}

// A convolution whose generated kernel can take the depthwise convolution after it (an inverted-residual block's
// expand and depthwise layers) has its kind priced: one generated kernel, whose intermediate feature map stays
// in a line buffer in cache, against two library calls. On generic-cpu the generated kernel wins and every join
// after it is taken.

// CHECK-LABEL: func.func @expand_depthwise(
// CHECK:         graph.conv {{.*}}gnomon.fusion = {group = 0 : i64, kind = "generated", generated_s = {{.*}} : f64, library_s = {{.*}} : f64}
// CHECK-NEXT:    graph.clip {{.*}}gnomon.fusion = {group = 0 : i64, decision = "fuse", {{.*}}}
// CHECK-NEXT:    graph.conv {{.*}}gnomon.fusion = {group = 0 : i64, decision = "fuse", {{.*}}}
// CHECK-NEXT:    graph.clip {{.*}}gnomon.fusion = {group = 0 : i64, decision = "fuse", {{.*}}}
// KERNEL-LABEL: func.func @expand_depthwise(
// KERNEL:         kernel.generated "conv_clip_conv_clip_0"
// KERNEL:           graph.conv
// KERNEL-SAME:        groups = 1 : i64
// KERNEL:           graph.conv
// KERNEL-SAME:        groups = 96 : i64
func.func @expand_depthwise(%x: tensor<1x16x28x28xf32>) -> tensor<1x96x28x28xf32> {
  %w = graph.constant {value = dense<0.1> : tensor<96x16x1x1xf32>} : () -> tensor<96x16x1x1xf32>
  %b = graph.constant {value = dense<0.1> : tensor<96xf32>} : () -> tensor<96xf32>
  %d = graph.constant {value = dense<0.2> : tensor<96x1x3x3xf32>} : () -> tensor<96x1x3x3xf32>
  %c = graph.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x16x28x28xf32>, tensor<96x16x1x1xf32>, tensor<96xf32>) -> tensor<1x96x28x28xf32>
  %r = graph.clip %c {min = 0.0 : f32, max = 6.0 : f32} : (tensor<1x96x28x28xf32>) -> tensor<1x96x28x28xf32>
  %e = graph.conv %r, %d, %b {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 96 : i64} : (tensor<1x96x28x28xf32>, tensor<96x1x3x3xf32>, tensor<96xf32>) -> tensor<1x96x28x28xf32>
  %y = graph.clip %e {min = 0.0 : f32, max = 6.0 : f32} : (tensor<1x96x28x28xf32>) -> tensor<1x96x28x28xf32>
  func.return %y : tensor<1x96x28x28xf32>
}

// A 1x1, stride-1 convolution alone (an inverted-residual block's projection) has its kind priced too: gnomon's
// loops against the library's BLAS product. Generated, it takes the residual add as it stores each row. A strided
// 1x1 convolution, like a 3x3 one, has no choice: it is oneDNN's.

// CHECK-LABEL: func.func @project_residual(
// CHECK:         graph.conv {{.*}}gnomon.fusion = {group = 0 : i64, kind = "generated", generated_s = {{.*}} : f64, library_s = {{.*}} : f64}
// CHECK-NEXT:    graph.add {{.*}}gnomon.fusion = {group = 0 : i64, decision = "fuse", {{.*}}}
// KERNEL-LABEL: func.func @project_residual(
// KERNEL:         kernel.generated "conv_add_0"
func.func @project_residual(%x: tensor<1x96x28x28xf32>, %s: tensor<1x24x28x28xf32>) -> tensor<1x24x28x28xf32> {
  %w = graph.constant {value = dense<0.1> : tensor<24x96x1x1xf32>} : () -> tensor<24x96x1x1xf32>
  %b = graph.constant {value = dense<0.1> : tensor<24xf32>} : () -> tensor<24xf32>
  %c = graph.conv %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x96x28x28xf32>, tensor<24x96x1x1xf32>, tensor<24xf32>) -> tensor<1x24x28x28xf32>
  %y = graph.add %c, %s : (tensor<1x24x28x28xf32>, tensor<1x24x28x28xf32>) -> tensor<1x24x28x28xf32>
  func.return %y : tensor<1x24x28x28xf32>
}

// CHECK-LABEL: func.func @strided_pointwise(
// CHECK:         graph.conv {{.*}}gnomon.fusion = {group = 0 : i64, kind = "anchor"}
// KERNEL-LABEL: func.func @strided_pointwise(
// KERNEL:         kernel.library "aten.convolution" epilogue ["relu"]
func.func @strided_pointwise(%x: tensor<1x96x28x28xf32>) -> tensor<1x24x14x14xf32> {
  %w = graph.constant {value = dense<0.1> : tensor<24x96x1x1xf32>} : () -> tensor<24x96x1x1xf32>
  %c = graph.conv %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x96x28x28xf32>, tensor<24x96x1x1xf32>) -> tensor<1x24x14x14xf32>
  %y = graph.relu %c : (tensor<1x24x14x14xf32>) -> tensor<1x24x14x14xf32>
  func.return %y : tensor<1x24x14x14xf32>
}

// A channels-last depthwise convolution and a grouped 1x1 one (ShuffleNet's) are each priced generated
// (`conv_nhwc`) against the library's call; the generated depthwise kernel takes its relu.

// CHECK-LABEL: func.func @channels_last_depthwise_then_grouped(
// CHECK:         graph.conv {{.*}}layout = "nhwc"{{.*}}gnomon.fusion = {group = 0 : i64, kind = "generated", generated_s = {{.*}} : f64, library_s = {{.*}} : f64}
// CHECK:         graph.relu {{.*}}gnomon.fusion = {group = 0 : i64, decision = "fuse"
// CHECK:         graph.conv {{.*}}layout = "nhwc"{{.*}}gnomon.fusion = {group = 1 : i64, kind = "generated", generated_s = {{.*}} : f64, library_s = {{.*}} : f64}
// KERNEL-LABEL: func.func @channels_last_depthwise_then_grouped(
// KERNEL:         kernel.generated "conv_relu_0"
// KERNEL:         kernel.generated "conv_1"
func.func @channels_last_depthwise_then_grouped(%x: tensor<1x28x28x136xf32>) -> tensor<1x28x28x136xf32> {
  %dw = graph.constant {value = dense<0.1> : tensor<136x1x3x3xf32>} : () -> tensor<136x1x3x3xf32>
  %c = graph.conv %x, %dw {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 136 : i64, layout = "nhwc"} : (tensor<1x28x28x136xf32>, tensor<136x1x3x3xf32>) -> tensor<1x28x28x136xf32>
  %r = graph.relu %c : (tensor<1x28x28x136xf32>) -> tensor<1x28x28x136xf32>
  %w = graph.constant {value = dense<0.1> : tensor<136x34x1x1xf32>} : () -> tensor<136x34x1x1xf32>
  %y = graph.conv %r, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 4 : i64, layout = "nhwc"} : (tensor<1x28x28x136xf32>, tensor<136x34x1x1xf32>) -> tensor<1x28x28x136xf32>
  func.return %y : tensor<1x28x28x136xf32>
}

// A channels-last dense 3x3 convolution (a stem's, strided) is priced generated (`conv_nhwc_dense`) against
// oneDNN's call too: on generic-cpu the generated kernel wins and takes its relu.

// CHECK-LABEL: func.func @channels_last_dense_stem(
// CHECK:         graph.conv {{.*}}layout = "nhwc"{{.*}}gnomon.fusion = {group = 0 : i64, kind = "generated", generated_s = {{.*}} : f64, library_s = {{.*}} : f64}
// CHECK:         graph.relu {{.*}}gnomon.fusion = {group = 0 : i64, decision = "fuse"
// KERNEL-LABEL: func.func @channels_last_dense_stem(
// KERNEL:         kernel.generated "conv_relu_0"
func.func @channels_last_dense_stem(%x: tensor<1x224x224x3xf32>) -> tensor<1x112x112x32xf32> {
  %w = graph.constant {value = dense<0.1> : tensor<32x3x3x3xf32>} : () -> tensor<32x3x3x3xf32>
  %c = graph.conv %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64, layout = "nhwc"} : (tensor<1x224x224x3xf32>, tensor<32x3x3x3xf32>) -> tensor<1x112x112x32xf32>
  %y = graph.relu %c : (tensor<1x112x112x32xf32>) -> tensor<1x112x112x32xf32>
  func.return %y : tensor<1x112x112x32xf32>
}

// Attention written out (matmul, scale, mask, softmax, matmul) is priced as the kernels it would be against one
// graph.attention: apart, the 4x128x128 scores and probabilities go to memory and back. The transpose of k is
// composed into the fused op's k (here it gives k itself), the scale divides.

// CHECK-LABEL: func.func @written_attention(
// CHECK-SAME:      %[[Q:.*]]: tensor<4x128x32xf32>, %[[K:.*]]: tensor<4x128x32xf32>, %[[V:.*]]: tensor<4x128x32xf32>, %[[M:.*]]: tensor<1x128xf32>)
// CHECK-NEXT:    %[[O:.*]] = graph.attention %[[Q]], %[[K]], %[[V]], %[[M]] {scale = 1.250000e-01 : f64, is_causal = false, gnomon.attention = {decision = "fuse", separate_s = {{.*}} : f64, fused_s = {{.*}} : f64}, gnomon.fusion = {group = 0 : i64, kind = "single"}}
// CHECK-NEXT:    func.return %[[O]]
// KERNEL-LABEL: func.func @written_attention(
// KERNEL:         kernel.library "aten.scaled_dot_product_attention"
// KERNEL-NOT:     gnomon.attention
func.func @written_attention(%q: tensor<4x128x32xf32>, %k: tensor<4x128x32xf32>, %v: tensor<4x128x32xf32>, %m: tensor<1x128xf32>) -> tensor<4x128x32xf32> {
  %kt = graph.transpose %k {permutation = array<i64: 0, 2, 1>} : (tensor<4x128x32xf32>) -> tensor<4x32x128xf32>
  %s = graph.matmul %q, %kt : (tensor<4x128x32xf32>, tensor<4x32x128xf32>) -> tensor<4x128x128xf32>
  %c = graph.constant {value = dense<8.0> : tensor<f32>} : () -> tensor<f32>
  %t = graph.div %s, %c : (tensor<4x128x128xf32>, tensor<f32>) -> tensor<4x128x128xf32>
  %u = graph.add %t, %m : (tensor<4x128x128xf32>, tensor<1x128xf32>) -> tensor<4x128x128xf32>
  %p = graph.softmax %u {axis = -1 : i64} : (tensor<4x128x128xf32>) -> tensor<4x128x128xf32>
  %o = graph.matmul %p, %v : (tensor<4x128x128xf32>, tensor<4x128x32xf32>) -> tensor<4x128x32xf32>
  func.return %o : tensor<4x128x32xf32>
}

// Probabilities the function also returns must exist: the written-out attention stays, with no decision.

// CHECK-LABEL: func.func @kept_probabilities(
// CHECK-NOT:     graph.attention
// CHECK:         graph.softmax
// CHECK-NOT:     gnomon.attention
// CHECK:         func.return
func.func @kept_probabilities(%q: tensor<4x128x32xf32>, %kt: tensor<4x32x128xf32>, %v: tensor<4x128x32xf32>) -> (tensor<4x128x32xf32>, tensor<4x128x128xf32>) {
  %s = graph.matmul %q, %kt : (tensor<4x128x32xf32>, tensor<4x32x128xf32>) -> tensor<4x128x128xf32>
  %p = graph.softmax %s {axis = -1 : i64} : (tensor<4x128x128xf32>) -> tensor<4x128x128xf32>
  %o = graph.matmul %p, %v : (tensor<4x128x128xf32>, tensor<4x128x32xf32>) -> tensor<4x128x32xf32>
  func.return %o, %p : tensor<4x128x32xf32>, tensor<4x128x128xf32>
}

// A causal mask written as masked_fill (nanoGPT): the fill keeps no key where the condition holds, so the fused
// op's boolean mask (true: keep) is the condition's negation, folded here since the condition is a constant.

// CHECK-LABEL: func.func @masked_fill_attention(
// CHECK:         %[[KEEP:.*]] = graph.constant {value = dense<{{\[\[}}true, false], [true, true]]> : tensor<2x2xi1>}
// CHECK-NEXT:    graph.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[KEEP]] {scale = 2.500000e-01 : f64, is_causal = false, gnomon.attention = {decision = "fuse"
func.func @masked_fill_attention(%q: tensor<64x2x16xf32>, %k: tensor<64x2x16xf32>, %v: tensor<64x2x16xf32>) -> tensor<64x2x16xf32> {
  %kt = graph.transpose %k {permutation = array<i64: 0, 2, 1>} : (tensor<64x2x16xf32>) -> tensor<64x16x2xf32>
  %s = graph.matmul %q, %kt : (tensor<64x2x16xf32>, tensor<64x16x2xf32>) -> tensor<64x2x2xf32>
  %c = graph.constant {value = dense<0.25> : tensor<f32>} : () -> tensor<f32>
  %t = graph.mul %s, %c : (tensor<64x2x2xf32>, tensor<f32>) -> tensor<64x2x2xf32>
  %future = graph.constant {value = dense<[[false, true], [false, false]]> : tensor<2x2xi1>} : () -> tensor<2x2xi1>
  %inf = graph.constant {value = dense<-3.0e+38> : tensor<f32>} : () -> tensor<f32>
  %u = graph.where %future, %inf, %t : (tensor<2x2xi1>, tensor<f32>, tensor<64x2x2xf32>) -> tensor<64x2x2xf32>
  %p = graph.softmax %u {axis = -1 : i64} : (tensor<64x2x2xf32>) -> tensor<64x2x2xf32>
  %o = graph.matmul %p, %v : (tensor<64x2x2xf32>, tensor<64x2x16xf32>) -> tensor<64x2x16xf32>
  func.return %o : tensor<64x2x16xf32>
}
