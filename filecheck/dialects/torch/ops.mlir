// RUN: gnomon-opt %s --allow-unregistered-dialect --print-op-generic | filecheck %s
// RUN: gnomon-opt %s --allow-unregistered-dialect --print-op-generic | gnomon-opt --allow-unregistered-dialect --print-op-generic | filecheck %s
// RUN: gnomon-opt %s --allow-unregistered-dialect | gnomon-opt --allow-unregistered-dialect --print-op-generic | filecheck %s

// torch-mlir's types and structural ops, in the generic form torch-mlir prints: parsing and
// printing again gives the same text. aten ops stay unregistered operations.

"func.func"() <{function_type = (!torch.vtensor<[?,3],f32>, !torch.vtensor<*,f32>, !torch.vtensor, !torch.vtensor<[2,4],si64>, !torch.vtensor<[],f64>, !torch.vtensor<[2],unk>, !torch.vtensor<[4],i1>) -> !torch.tuple<vtensor<[?,3],f32>, int>, sym_name = "forward"}> ({
^bb0(%arg0: !torch.vtensor<[?,3],f32>, %arg1: !torch.vtensor<*,f32>, %arg2: !torch.vtensor, %arg3: !torch.vtensor<[2,4],si64>, %arg4: !torch.vtensor<[],f64>, %arg5: !torch.vtensor<[2],unk>, %arg6: !torch.vtensor<[4],i1>):
  %0 = "torch.constant.int"() <{value = 3 : i64}> : () -> !torch.int
  %1 = "torch.constant.float"() <{value = 1.000000e-05 : f64}> : () -> !torch.float
  %2 = "torch.constant.bool"() <{value = false}> : () -> !torch.bool
  %3 = "torch.constant.none"() : () -> !torch.none
  %4 = "torch.constant.str"() <{value = "tanh"}> : () -> !torch.str
  %5 = "torch.constant.device"() <{value = "cpu"}> : () -> !torch.Device
  %6 = "torch.vtensor.literal"() <{value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>}> : () -> !torch.vtensor<[2],f32>
  %7 = "torch.vtensor.literal"() <{value = dense_resource<fc_weight> : tensor<4x3xf32>}> : () -> !torch.vtensor<[4,3],f32>
  %8 = "torch.prim.ListConstruct"(%0, %0) : (!torch.int, !torch.int) -> !torch.list<int>
  %9 = "torch.prim.ListConstruct"(%6, %6) : (!torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>) -> !torch.list<vtensor<[2],f32>>
  %10 = "torch.prim.ListConstruct"(%8, %8) : (!torch.list<int>, !torch.list<int>) -> !torch.list<list<int>>
  %11 = "torch.prim.ListConstruct"(%arg1, %arg2) : (!torch.vtensor<*,f32>, !torch.vtensor) -> !torch.list<vtensor>
  %12:2 = "torch.prim.ListUnpack"(%9) : (!torch.list<vtensor<[2],f32>>) -> (!torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>)
  %13 = "torch.aten.gelu"(%arg0, %4) : (!torch.vtensor<[?,3],f32>, !torch.str) -> !torch.vtensor<[?,3],f32>
  %14 = "torch.aten.linear"(%13, %7, %3) : (!torch.vtensor<[?,3],f32>, !torch.vtensor<[4,3],f32>, !torch.none) -> !torch.vtensor<[?,4],f32>
  %15 = "torch.prim.TupleConstruct"(%arg0, %0) : (!torch.vtensor<[?,3],f32>, !torch.int) -> !torch.tuple<vtensor<[?,3],f32>, int>
  "func.return"(%15) : (!torch.tuple<vtensor<[?,3],f32>, int>) -> ()
}) : () -> ()

// The custom form of func.func puts sym_name first.
// CHECK:      "func.func"() <{{.*}}function_type = (!torch.vtensor<[?,3],f32>, !torch.vtensor<*,f32>, !torch.vtensor, !torch.vtensor<[2,4],si64>, !torch.vtensor<[],f64>, !torch.vtensor<[2],unk>, !torch.vtensor<[4],i1>) -> !torch.tuple<vtensor<[?,3],f32>, int>{{.*}}}> ({
// CHECK-NEXT: ^bb0(%{{.*}}: !torch.vtensor<[?,3],f32>, %{{.*}}: !torch.vtensor<*,f32>, %{{.*}}: !torch.vtensor, %{{.*}}: !torch.vtensor<[2,4],si64>, %{{.*}}: !torch.vtensor<[],f64>, %{{.*}}: !torch.vtensor<[2],unk>, %{{.*}}: !torch.vtensor<[4],i1>):
// CHECK-NEXT:   %{{.*}} = "torch.constant.int"() <{value = 3 : i64}> : () -> !torch.int
// CHECK-NEXT:   %{{.*}} = "torch.constant.float"() <{value = 1.000000e-05 : f64}> : () -> !torch.float
// CHECK-NEXT:   %{{.*}} = "torch.constant.bool"() <{value = false}> : () -> !torch.bool
// CHECK-NEXT:   %{{.*}} = "torch.constant.none"() : () -> !torch.none
// CHECK-NEXT:   %{{.*}} = "torch.constant.str"() <{value = "tanh"}> : () -> !torch.str
// CHECK-NEXT:   %{{.*}} = "torch.constant.device"() <{value = "cpu"}> : () -> !torch.Device
// CHECK-NEXT:   %{{.*}} = "torch.vtensor.literal"() <{value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>}> : () -> !torch.vtensor<[2],f32>
// CHECK-NEXT:   %{{.*}} = "torch.vtensor.literal"() <{value = dense_resource<fc_weight> : tensor<4x3xf32>}> : () -> !torch.vtensor<[4,3],f32>
// CHECK-NEXT:   %{{.*}} = "torch.prim.ListConstruct"(%{{.*}}, %{{.*}}) : (!torch.int, !torch.int) -> !torch.list<int>
// CHECK-NEXT:   %{{.*}} = "torch.prim.ListConstruct"(%{{.*}}, %{{.*}}) : (!torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>) -> !torch.list<vtensor<[2],f32>>
// CHECK-NEXT:   %{{.*}} = "torch.prim.ListConstruct"(%{{.*}}, %{{.*}}) : (!torch.list<int>, !torch.list<int>) -> !torch.list<list<int>>
// CHECK-NEXT:   %{{.*}} = "torch.prim.ListConstruct"(%{{.*}}, %{{.*}}) : (!torch.vtensor<*,f32>, !torch.vtensor) -> !torch.list<vtensor>
// CHECK-NEXT:   %{{.*}}, %{{.*}} = "torch.prim.ListUnpack"(%{{.*}}) : (!torch.list<vtensor<[2],f32>>) -> (!torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>)
// CHECK-NEXT:   %{{.*}} = "torch.aten.gelu"(%{{.*}}, %{{.*}}) : (!torch.vtensor<[?,3],f32>, !torch.str) -> !torch.vtensor<[?,3],f32>
// CHECK-NEXT:   %{{.*}} = "torch.aten.linear"(%{{.*}}, %{{.*}}, %{{.*}}) : (!torch.vtensor<[?,3],f32>, !torch.vtensor<[4,3],f32>, !torch.none) -> !torch.vtensor<[?,4],f32>
// CHECK-NEXT:   %{{.*}} = "torch.prim.TupleConstruct"(%{{.*}}, %{{.*}}) : (!torch.vtensor<[?,3],f32>, !torch.int) -> !torch.tuple<vtensor<[?,3],f32>, int>
// CHECK-NEXT:   "func.return"(%{{.*}}) : (!torch.tuple<vtensor<[?,3],f32>, int>) -> ()
// CHECK-NEXT: }) : () -> ()

// The remaining types, as attribute values: optionals, tuples, nested containers, numbers, generators.
"test.op"() {optional = !torch.optional<int>, tuple = !torch.tuple<int, float>, nested = !torch.list<optional<vtensor<[?],f32>>>, optional_list = !torch.optional<list<int>>, tuple_of_lists = !torch.tuple<list<vtensor<[2],f32>>, optional<vtensor>, bool>, number = !torch.number, generator = !torch.Generator} : () -> ()

// CHECK-NEXT: "test.op"() {optional = !torch.optional<int>, tuple = !torch.tuple<int, float>, nested = !torch.list<optional<vtensor<[?],f32>>>, optional_list = !torch.optional<list<int>>, tuple_of_lists = !torch.tuple<list<vtensor<[2],f32>>, optional<vtensor>, bool>, number = !torch.number, generator = !torch.Generator} : () -> ()
