"""Write small ONNX models for the import tests: `make_onnx.py KIND OUT.onnx`."""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_block() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    fc = numpy_helper.from_array(rng.standard_normal((10, 8)).astype(np.float32), "fc")
    fc_b = numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fc_b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["r"], name="relu1"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc", "fc_b"], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "conv_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [w, b, fc, fc_b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def dynamic_batch() -> onnx.ModelProto:
    """conv_block with a symbolic batch dim named "N"."""
    model = conv_block()
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_param = "N"
    return model


def unsupported() -> onnx.ModelProto:
    """Two ops torch-mlir cannot lower, from a custom domain, and one it can."""
    nodes = [
        helper.make_node("Foo", ["x"], ["a"], name="bar", domain="com.example"),
        helper.make_node("Relu", ["a"], ["b"], name="relu"),
        helper.make_node("Baz", ["b"], ["y"], name="qux", domain="com.example"),
    ]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "unsupported",
        [value("x", TensorProto.FLOAT, [2, 4])],
        [value("y", TensorProto.FLOAT, [2, 4])],
        value_info=[value("a", TensorProto.FLOAT, [2, 4]), value("b", TensorProto.FLOAT, [2, 4])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    return helper.make_model(graph, opset_imports=opsets)


if __name__ == "__main__":
    kind, out = sys.argv[1], sys.argv[2]
    onnx.save({"conv_block": conv_block, "dynamic_batch": dynamic_batch, "unsupported": unsupported}[kind](), out)
