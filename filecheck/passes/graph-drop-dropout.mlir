// RUN: gnomon-opt %s -p graph-drop-dropout | filecheck %s

// Inference dropout is the identity: each dropout's uses take its input instead.

// CHECK-LABEL: func.func @dropout(
// CHECK-SAME:      %[[X:.*]]: tensor<2x8xf32>)
// CHECK-NEXT:    %[[Y:.*]] = graph.relu %[[X]] : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    func.return %[[Y]], %[[X]] : tensor<2x8xf32>, tensor<2x8xf32>
func.func @dropout(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %0 = graph.dropout %x {ratio = 0.1 : f64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %1 = graph.relu %0 : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %2 = graph.dropout %1 {ratio = 0.5 : f64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  func.return %2, %0 : tensor<2x8xf32>, tensor<2x8xf32>
}

// A chain of dropouts goes entirely.

// CHECK-LABEL: func.func @dropout_chain(
// CHECK-SAME:      %[[X:.*]]: tensor<?x4xf32>)
// CHECK-NEXT:    func.return %[[X]] : tensor<?x4xf32>
func.func @dropout_chain(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = graph.dropout %x {ratio = 0.2 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  %1 = graph.dropout %0 {ratio = 0.2 : f64} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  func.return %1 : tensor<?x4xf32>
}

// Other ops stay, identity data movement included: removing that is graph-canonicalize's job.

// CHECK-LABEL: func.func @no_dropout(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT:    %[[Y:.*]] = graph.reshape %[[X]] : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<2x3xf32>
func.func @no_dropout(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = graph.reshape %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}
