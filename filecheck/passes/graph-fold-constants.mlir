// RUN: gnomon-opt %s -p graph-fold-constants | filecheck %s
// RUN: gnomon-opt %s -p graph-fold-constants --print-debuginfo | filecheck %s --check-prefix=LOC

// An explicit builtin.module: xDSL's opt driver loads the builtin dialect, whose resource section
// prints the blobs of folded values, only when the input names one of its ops.
builtin.module {

// The transpose of a weight (as ONNX exporters emit for x @ wᵀ) becomes the transposed weight,
// at the transpose's location; the original, now unused, goes.

// CHECK-LABEL: func.func @transposed_weight(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT:    %[[W:.*]] = graph.constant {value = dense<{{\[\[}}1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00], [3.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.matmul %[[X]], %[[W]] : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<2x2xf32>
// LOC-LABEL:   func.func @transposed_weight(
// LOC-NEXT:      graph.constant {{.*}} loc("fc.transpose")
func.func @transposed_weight(%x: tensor<2x3xf32>) -> tensor<2x2xf32> {
  %w = graph.constant {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32> loc("fc.weight")
  %wt = graph.transpose %w {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32> loc("fc.transpose")
  %y = graph.matmul %x, %wt : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  func.return %y : tensor<2x2xf32>
}

// Chains fold to one constant: reshape, transpose, then a float computation and a comparison.

// CHECK-LABEL: func.func @chain(
// CHECK-NEXT:    %[[C:.*]] = graph.constant {value = dense<[2.000000e+00, 6.000000e+00, 4.000000e+00, 8.000000e+00]> : tensor<4xf32>} : () -> tensor<4xf32>
// CHECK-NEXT:    %[[M:.*]] = graph.constant {value = dense<[false, true, false, true]> : tensor<4xi1>} : () -> tensor<4xi1>
// CHECK-NEXT:    func.return %[[C]], %[[M]] : tensor<4xf32>, tensor<4xi1>
func.func @chain() -> (tensor<4xf32>, tensor<4xi1>) {
  %a = graph.constant {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>} : () -> tensor<4xf32>
  %five = graph.constant {value = dense<5.0> : tensor<f32>} : () -> tensor<f32>
  %r = graph.reshape %a : (tensor<4xf32>) -> tensor<2x2xf32>
  %t = graph.transpose %r {permutation = array<i64: 1, 0>} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %f = graph.reshape %t : (tensor<2x2xf32>) -> tensor<4xf32>
  %d = graph.add %f, %f : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m = graph.gt %d, %five : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  func.return %d, %m : tensor<4xf32>, tensor<4xi1>
}

// Every result of a multi-result op folds.

// CHECK-LABEL: func.func @split(
// CHECK-NEXT:    %[[A:.*]] = graph.constant {value = dense<[1, 2]> : tensor<2xi64>} : () -> tensor<2xi64>
// CHECK-NEXT:    %[[B:.*]] = graph.constant {value = dense<3> : tensor<1xi64>} : () -> tensor<1xi64>
// CHECK-NEXT:    func.return %[[A]], %[[B]] : tensor<2xi64>, tensor<1xi64>
func.func @split() -> (tensor<2xi64>, tensor<1xi64>) {
  %a = graph.constant {value = dense<[1, 2, 3]> : tensor<3xi64>} : () -> tensor<3xi64>
  %0, %1 = graph.split %a {axis = 0 : i64, sizes = array<i64: 2, 1>} : (tensor<3xi64>) -> (tensor<2xi64>, tensor<1xi64>)
  func.return %0, %1 : tensor<2xi64>, tensor<1xi64>
}

// Values of more than 16 elements become dense_resource blobs named after the op's location;
// the blob (checked at the end of the file) holds the transpose of arange(32).reshape(4, 8): 0, 8, 16, 24, 1...

// CHECK-LABEL: func.func @large_result(
// CHECK-NEXT:    %[[W:.*]] = graph.constant {value = dense_resource<[[KEY:fc.transpose_[0-9a-f]+]]> : tensor<8x4xf32>} : () -> tensor<8x4xf32>
// CHECK-NEXT:    func.return %[[W]] : tensor<8x4xf32>
func.func @large_result() -> tensor<8x4xf32> {
  %w = graph.constant {value = dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0], [16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0], [24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0]]> : tensor<4x8xf32>} : () -> tensor<4x8xf32>
  %wt = graph.transpose %w {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32> loc("fc.transpose")
  func.return %wt : tensor<8x4xf32>
}

// A splat result stores its one element, however large its type.

// CHECK-LABEL: func.func @splat_result(
// CHECK-NEXT:    %[[C:.*]] = graph.constant {value = dense<0.000000e+00> : tensor<256x256xf32>} : () -> tensor<256x256xf32>
// CHECK-NEXT:    func.return %[[C]] : tensor<256x256xf32>
func.func @splat_result() -> tensor<256x256xf32> {
  %a = graph.constant {value = dense<-1.0> : tensor<256x256xf32>} : () -> tensor<256x256xf32>
  %r = graph.relu %a : (tensor<256x256xf32>) -> tensor<256x256xf32>
  func.return %r : tensor<256x256xf32>
}

// Broadcasts fold only while the result stays small: an expand to 2x3 folds, one to 64x64 and
// a 40x1 + 1x40 outer sum (1600 elements from 80) stay ops.

// CHECK-LABEL: func.func @broadcasts(
// CHECK-NEXT:    %[[ONE:.*]] = graph.constant {value = dense<1.000000e+00> : tensor<1xf32>} : () -> tensor<1xf32>
// CHECK-NEXT:    %[[COL:.*]] = graph.constant {value = dense<2.000000e+00> : tensor<40x1xf32>} : () -> tensor<40x1xf32>
// CHECK-NEXT:    %[[ROW:.*]] = graph.constant {value = dense<3.000000e+00> : tensor<1x40xf32>} : () -> tensor<1x40xf32>
// CHECK-NEXT:    %[[SMALL:.*]] = graph.constant {value = dense<1.000000e+00> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
// CHECK-NEXT:    %[[BIG:.*]] = graph.expand %[[ONE]] : (tensor<1xf32>) -> tensor<64x64xf32>
// CHECK-NEXT:    %[[SUM:.*]] = graph.add %[[COL]], %[[ROW]] : (tensor<40x1xf32>, tensor<1x40xf32>) -> tensor<40x40xf32>
// CHECK-NEXT:    func.return %[[SMALL]], %[[BIG]], %[[SUM]]
func.func @broadcasts() -> (tensor<2x3xf32>, tensor<64x64xf32>, tensor<40x40xf32>) {
  %one = graph.constant {value = dense<1.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %col = graph.constant {value = dense<2.0> : tensor<40x1xf32>} : () -> tensor<40x1xf32>
  %row = graph.constant {value = dense<3.0> : tensor<1x40xf32>} : () -> tensor<1x40xf32>
  %small = graph.expand %one : (tensor<1xf32>) -> tensor<2x3xf32>
  %big = graph.expand %one : (tensor<1xf32>) -> tensor<64x64xf32>
  %sum = graph.add %col, %row : (tensor<40x1xf32>, tensor<1x40xf32>) -> tensor<40x40xf32>
  func.return %small, %big, %sum : tensor<2x3xf32>, tensor<64x64xf32>, tensor<40x40xf32>
}

// Not folded: an operand that is not a constant, and a result whose shape is not static.

// CHECK-LABEL: func.func @not_constant(
// CHECK-SAME:      %[[X:.*]]: tensor<2xf32>)
// CHECK-NEXT:    %[[C:.*]] = graph.constant
// CHECK-NEXT:    %[[S:.*]] = graph.add %[[X]], %[[C]]
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %[[C]] : (tensor<2xf32>) -> tensor<?xf32>
// CHECK-NEXT:    func.return %[[S]], %[[R]]
func.func @not_constant(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<?xf32>) {
  %c = graph.constant {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %s = graph.add %x, %c : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %r = graph.reshape %c : (tensor<2xf32>) -> tensor<?xf32>
  func.return %s, %r : tensor<2xf32>, tensor<?xf32>
}

// An op with no elements to compute becomes an empty constant, whatever its operands; an op with an empty
// operand but elements to compute stays.

// CHECK-LABEL: func.func @empty_results(
// CHECK-SAME:      %[[X:.*]]: tensor<3x0x5xf32>, %[[Y:.*]]: tensor<3x0xf32>)
// CHECK-NEXT:    %[[E:.*]] = graph.constant {value = dense<> : tensor<3x0x5xf32>} : () -> tensor<3x0x5xf32>
// CHECK-NEXT:    %[[S:.*]] = graph.reduce_sum %[[Y]]
// CHECK-NEXT:    func.return %[[E]], %[[S]]
func.func @empty_results(%x: tensor<3x0x5xf32>, %y: tensor<3x0xf32>) -> (tensor<3x0x5xf32>, tensor<3xf32>) {
  %e = graph.exp %x : (tensor<3x0x5xf32>) -> tensor<3x0x5xf32>
  %s = graph.reduce_sum %y {axes = array<i64: 1>, keepdims = false} : (tensor<3x0xf32>) -> tensor<3xf32>
  func.return %e, %s : tensor<3x0x5xf32>, tensor<3xf32>
}

}

// The blob of @large_result, after its 4-byte alignment: 0.0, 8.0, 16.0, 24.0, 1.0 as little-endian f32.
// CHECK:       dialect_resources: {
// CHECK-NEXT:    builtin: {
// CHECK-NEXT:      [[KEY]]: "0x040000000000000000000041000080410000c0410000803f
