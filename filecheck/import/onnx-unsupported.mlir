// Every unsupported op is reported, one line each with its node and file, and the import exits 2.
// RUN: %python %S/Inputs/make_onnx.py unsupported %t.onnx
// RUN: not gnomon import %t.onnx 2>&1 | filecheck %s

// CHECK:      gnomon: error: unsupported op com.example.Foo at node 'bar' in {{.*}}.onnx
// CHECK-NEXT: gnomon: error: unsupported op com.example.Baz at node 'qux' in {{.*}}.onnx
// CHECK-NOT:  Traceback
