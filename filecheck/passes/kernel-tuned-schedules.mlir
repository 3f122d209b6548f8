// RUN: rm -rf %t && %python %S/Inputs/tuning_entry.py %s %t mul_relu_0 "#kernel.schedule<tile = [0, 0], vector = 8, order = [0, 1], threads = 1>"
// RUN: gnomon-opt %s -p 'kernel-tuned-schedules{database="%t"}' | filecheck %s
// RUN: gnomon-opt %s -p 'kernel-tuned-schedules{database="%t-empty"}' | filecheck %s --check-prefix=NONE

// The kernel with an entry takes its schedule and the measured speedup; the other keeps its default.

// CHECK:      kernel.func @mul_relu_0(%{{.*}}: tensor<64x64xf32>) -> tensor<64x64xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [0, 1], threads = 1>, gnomon.tuned = 2.000000e+00 : f64} {
// CHECK:      kernel.func @add_1(%{{.*}}: tensor<64x64xf32>) -> tensor<64x64xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [0, 1], threads = 2>} {

// Without an entry, nothing changes.
// NONE-NOT:   gnomon.tuned
// NONE:       schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [0, 1], threads = 2>
// NONE-NOT:   gnomon.tuned

builtin.module {
  kernel.func @mul_relu_0(%a: tensor<64x64xf32>) -> tensor<64x64xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [0, 1], threads = 2>} {
    %m = graph.mul %a, %a : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
    %r = graph.relu %m : (tensor<64x64xf32>) -> tensor<64x64xf32>
    kernel.yield %r : tensor<64x64xf32>
  }
  kernel.func @add_1(%a: tensor<64x64xf32>) -> tensor<64x64xf32> attributes {kind = "generated", schedule = #kernel.schedule<tile = [0, 0], vector = 8, order = [0, 1], threads = 2>} {
    %s = graph.add %a, %a : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
    kernel.yield %s : tensor<64x64xf32>
  }
}
