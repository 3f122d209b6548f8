// RUN: gnomon-opt %s --split-input-file --verify-diagnostics | filecheck %s

// The torch structural ops' own check, and the types their results must have.

%0 = "torch.constant.int"() <{value = 2 : i64}> : () -> !torch.int
%1 = "torch.prim.ListConstruct"(%0) : (!torch.int) -> !torch.list<int>
// CHECK: torch.prim.ListUnpack takes one list operand, got 2
%2:2 = "torch.prim.ListUnpack"(%1, %1) : (!torch.list<int>, !torch.list<int>) -> (!torch.int, !torch.int)

// -----

// CHECK: !torch.float should be of base attribute torch.int
%0 = "torch.constant.int"() <{value = 2 : i64}> : () -> !torch.float

// -----

%0 = "torch.constant.int"() <{value = 2 : i64}> : () -> !torch.int
// CHECK: !torch.tuple<int> should be of base attribute torch.list
%1 = "torch.prim.ListConstruct"(%0) : (!torch.int) -> !torch.tuple<int>
