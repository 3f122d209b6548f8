"""Reference semantics of the graph dialect's constants and data movement, in NumPy."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import DYNAMIC_INDEX
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls

from gnomon.dialects.graph import tensor
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.constant_values import constant_to_numpy
from gnomon.reference.base import Array, typed

_SCATTER_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
"""The ufunc each reduction of graph.scatter_elements combines an element and an update with."""


def constant_value(op: tensor.ConstantOp) -> Array:
    """A constant's value as a writable array (a compact splat is materialized)."""
    return constant_to_numpy(op.value)


@register_impls
class GraphTensorFunctions(InterpreterFunctions):
    @impl(tensor.ConstantOp)
    def run_constant(self, interpreter: Interpreter, op: tensor.ConstantOp, args: PythonValues) -> PythonValues:
        return (constant_value(op),)

    @impl(tensor.ReshapeOp)
    def run_reshape(self, interpreter: Interpreter, op: tensor.ReshapeOp, args: PythonValues) -> PythonValues:
        # A `?` dim of the result is NumPy's -1: the verifier allows at most one.
        return (args[0].reshape(op.result.type.get_shape()),)

    @impl(tensor.TransposeOp)
    def run_transpose(self, interpreter: Interpreter, op: tensor.TransposeOp, args: PythonValues) -> PythonValues:
        return (np.transpose(args[0], ints(op.permutation)),)

    @impl(tensor.ConcatOp)
    def run_concat(self, interpreter: Interpreter, op: tensor.ConcatOp, args: PythonValues) -> PythonValues:
        return (typed(op.result, np.concatenate(args, axis=op.axis.value.data)),)

    @impl(tensor.SplitOp)
    def run_split(self, interpreter: Interpreter, op: tensor.SplitOp, args: PythonValues) -> PythonValues:
        boundaries = np.cumsum(ints(op.sizes))[:-1]
        return tuple(np.split(args[0], boundaries, axis=op.axis.value.data))

    @impl(tensor.SliceOp)
    def run_slice(self, interpreter: Interpreter, op: tensor.SliceOp, args: PythonValues) -> PythonValues:
        # A negative end runs past the start of the dim when stepping backwards (ONNX's INT_MIN end).
        index = tuple(
            slice(start, None if end < 0 else end, step)
            for start, end, step in zip(ints(op.starts), ints(op.ends), ints(op.steps), strict=True)
        )
        return (args[0][index],)

    @impl(tensor.GatherOp)
    def run_gather(self, interpreter: Interpreter, op: tensor.GatherOp, args: PythonValues) -> PythonValues:
        return (np.take(args[0], args[1], axis=op.axis.value.data),)

    @impl(tensor.GatherElementsOp)
    def run_gather_elements(
        self, interpreter: Interpreter, op: tensor.GatherElementsOp, args: PythonValues
    ) -> PythonValues:
        return (np.take_along_axis(args[0], args[1], axis=op.axis.value.data),)

    @impl(tensor.ScatterElementsOp)
    def run_scatter_elements(
        self, interpreter: Interpreter, op: tensor.ScatterElementsOp, args: PythonValues
    ) -> PythonValues:
        x, indices, updates = np.asarray(args[0]), np.asarray(args[1]), np.asarray(args[2])
        axis, out = op.scatter_axis(), np.array(x, order="C")
        # Each update's flat position in the output: its own coordinates, with its index along the axis.
        where: list[Array] = list(np.indices(indices.shape, sparse=True))
        where[axis] = np.where(indices < 0, indices + x.shape[axis], indices)
        positions, values = np.ravel_multi_index(tuple(where), x.shape).reshape(-1), updates.reshape(-1)
        reduction = op.reduction.data
        if reduction != "none":
            _SCATTER_REDUCTIONS[reduction].at(out.reshape(-1), positions, values)
            return (out,)
        # NumPy leaves the order of repeated assignments open: keep each position's last update explicitly.
        _, from_end = np.unique(positions[::-1], return_index=True)
        last = len(positions) - 1 - from_end
        out.reshape(-1)[positions[last]] = values[last]
        return (out,)

    @impl(tensor.SliceScatterOp)
    def run_slice_scatter(
        self, interpreter: Interpreter, op: tensor.SliceScatterOp, args: PythonValues
    ) -> PythonValues:
        out = np.array(args[0])
        index = tuple(slice(*bounds) for bounds in zip(ints(op.starts), ints(op.ends), ints(op.steps), strict=True))
        out[index] = args[1]
        return (out,)

    @impl(tensor.PadOp)
    def run_pad(self, interpreter: Interpreter, op: tensor.PadOp, args: PythonValues) -> PythonValues:
        x: Array = args[0]
        pads = ints(op.pads)
        rank = x.ndim
        widths = [(pads[i], pads[i + rank]) for i in range(rank)]
        # Negative pads crop; NumPy's pad takes only the non-negative part.
        crop = tuple(slice(max(0, -b), x.shape[i] - max(0, -e)) for i, (b, e) in enumerate(widths))
        x = x[crop]
        widths = [(max(0, b), max(0, e)) for b, e in widths]
        mode = op.mode.data
        if mode == "constant":
            return (typed(op.result, np.pad(x, widths, constant_values=op.value.value.data)),)
        if mode == "reflect":
            return (np.pad(x, widths, mode="reflect"),)
        if mode == "replicate":
            return (np.pad(x, widths, mode="edge"),)
        if mode == "wrap":
            return (np.pad(x, widths, mode="wrap"),)
        raise NotImplementedError(f"graph.pad: unknown mode {mode!r}")

    @impl(tensor.ExpandOp)
    def run_expand(self, interpreter: Interpreter, op: tensor.ExpandOp, args: PythonValues) -> PythonValues:
        x: Array = args[0]
        shape = op.result.type.get_shape()
        # A `?` target dim keeps the input's size there (right-aligned, as in broadcasting).
        dims = (1,) * (len(shape) - x.ndim) + x.shape
        target = tuple(d if s == DYNAMIC_INDEX else s for s, d in zip(shape, dims, strict=True))
        return (np.array(np.broadcast_to(x, target)),)

    @impl(tensor.IotaOp)
    def run_iota(self, interpreter: Interpreter, op: tensor.IotaOp, args: PythonValues) -> PythonValues:
        like = np.asarray(args[0])
        return (typed(op.result, np.arange(like.shape[op.axis.value.data % like.ndim])),)

    @impl(tensor.TileOp)
    def run_tile(self, interpreter: Interpreter, op: tensor.TileOp, args: PythonValues) -> PythonValues:
        return (np.tile(args[0], ints(op.repeats)),)
