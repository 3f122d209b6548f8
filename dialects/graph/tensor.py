"""Data-movement graph ops: constants, reshape, transpose, concat, split, slice, gather, scatter, pad, expand, tile."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar, cast

from xdsl.dialects.builtin import (
    AnyFloat,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
)
from xdsl.ir import SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.printer import Printer
from xdsl.traits import ConstantLike, Pure
from xdsl.utils.exceptions import VerifyException

from gnomon.dialects.graph.base import (
    DYN,
    GraphOperation,
    SymbolicDim,
    TensorT,
    broadcast_shapes,
    dim_str,
    dim_symbols,
    dims_compatible,
    dtype_of,
    ints,
    multiply_dims,
    normalize_axis,
    product_name,
    shape_of,
    shape_str,
    sum_name,
    tensor_of,
    tensor_type,
)
from gnomon.dialects.graph.constant_values import splat_bytes
from gnomon.dialects.graph.traits import (
    ExpandCanonicalization,
    FoldsIntegerConstants,
    ReadsAtDataIndices,
    ReshapeCanonicalization,
    TransposeCanonicalization,
)


@irdl_op_definition
class ConstantOp(GraphOperation):
    """A tensor constant: weights are `dense_resource` blobs, small values and splats inline `dense`.

    A splat may store just its one element (`constant_values.compact_splat`); read values with
    `constant_values.dense_to_numpy`, which broadcasts it.

    `%w = graph.constant {value = dense_resource<conv1_w> : tensor<64x3x7x7xf32>} : () -> tensor<64x3x7x7xf32>`
    """

    name = "graph.constant"
    value = prop_def(DenseIntOrFPElementsAttr | DenseResourceAttr)
    result = result_def(TensorType)
    traits = traits_def(ConstantLike(), Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        return [tensor_type(self.value.get_type(), "graph.constant value")]

    def print(self, printer: Printer) -> None:
        printer.print_string(" {value = ")
        value = self.value
        limit: int | None = getattr(printer, "large_elements_limit", None)
        splat = _splat_element(value) if isinstance(value, DenseIntOrFPElementsAttr) else None
        if isinstance(value, DenseIntOrFPElementsAttr) and _has_bare_non_finite(splat or value):
            # xDSL prints ±inf and nan as bare bit patterns, which its parser reads back as integers;
            # the quoted raw-data form round-trips (one element's bytes stand for a splat).
            printer.print_string(f'dense<"0x{(splat or value).data.data.hex().upper()}"> : ')
            printer.print_attribute(value.get_type())
        elif splat is not None:
            # xDSL's splat check unpacks every element: too slow for the weights of a real network.
            splat.print_without_type(printer)
            printer.print_string(" : ")
            printer.print_attribute(value.get_type())
        elif limit is not None and (isinstance(value, DenseResourceAttr) or len(value) > limit):
            printer.print_string("dense_resource<__elided__> : ")
            printer.print_attribute(value.get_type())
        else:
            printer.print_attribute(value)
        printer.print_string("}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : () -> ")
        printer.print_attribute(self.result.type)


def _has_bare_non_finite(value: DenseIntOrFPElementsAttr) -> bool:
    """Whether xDSL would print `value` with bare hex floats: a short float list with inf or nan."""
    if len(value) > 100 or not isinstance(value.get_element_type(), AnyFloat):
        return False
    # The element-type check above does not narrow the attribute's type parameter for pyright.
    floats = cast("DenseIntOrFPElementsAttr[AnyFloat]", value)
    return not all(math.isfinite(v) for v in floats.get_values())


def _splat_element(value: DenseIntOrFPElementsAttr) -> DenseIntOrFPElementsAttr | None:
    """The single repeated element of a splat (as a 0-d attribute), or None."""
    element = splat_bytes(value)
    if element is None:
        return None
    return DenseIntOrFPElementsAttr(TensorType(value.get_element_type(), []), BytesAttr(element))


@irdl_op_definition
class ReshapeOp(GraphOperation):
    """Reinterpret the elements in row-major order under the result's shape (view, flatten, squeeze, unsqueeze).

    One result dim may be `?`: it holds whatever the other dims leave (torch's and ONNX's -1).

    `%y = graph.reshape %x : (tensor<1x2048x1x1xf32>) -> tensor<1x2048xf32>`
    """

    name = "graph.reshape"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), ReshapeCanonicalization())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = tensor_type(self.input, "graph.reshape input")
        out = tensor_type(self.result, "graph.reshape result")
        if x.get_element_type() != out.get_element_type():
            raise VerifyException(
                f"graph.reshape: element type changes from {x.get_element_type()} to {out.get_element_type()}"
            )
        count_in, count_out = multiply_dims(x.get_shape()), multiply_dims(out.get_shape())
        if DYN not in (count_in, count_out) and count_in != count_out:
            raise VerifyException(
                f"graph.reshape: input {shape_str(x.get_shape())} has {count_in} elements,"
                f" result {shape_str(out.get_shape())} has {count_out}"
            )
        shape = list(out.get_shape())
        if shape.count(DYN) > 1:
            raise VerifyException(f"graph.reshape: result {shape_str(shape)} has more than one dynamic dim")
        known = multiply_dims([d for d in shape if d != DYN])
        dynamic_in = [d for d in shape_of(self.input, "input") if d == DYN]
        if len(dynamic_in) == 1 and DYN in shape and multiply_dims([d for d in x.get_shape() if d != DYN]) == known:
            # ? * k elements reshaped to ? * k: the same dim, so it keeps its name (a flatten of [N, C, 1, 1]).
            shape[shape.index(DYN)] = dynamic_in[0]
            return [tensor_of(out.get_element_type(), shape)]
        if dynamic_in and DYN in shape and all(isinstance(d, SymbolicDim) for d in dynamic_in):
            # The result's `?` holds what its static dims leave of the input's named ones: a view of [2, seq, 64]
            # as [?, 64] is `2*seq`, and back as [2, ?, 64] is `seq` again.
            names = [d.symbol for d in dynamic_in if isinstance(d, SymbolicDim)]
            static = multiply_dims([d for d in x.get_shape() if d != DYN])
            total = product_name(static, names)
            factor = int(total.split("*")[0]) if total.split("*")[0].isdigit() else 1
            if total and "+" not in total and known and factor % known == 0:
                shape[shape.index(DYN)] = SymbolicDim(product_name(factor // known, dim_symbols(total)))
                return [tensor_of(out.get_element_type(), shape)]
        if count_in == DYN or DYN not in shape or known == 0:
            return [out]
        if count_in % known:
            raise VerifyException(
                f"graph.reshape: input {shape_str(x.get_shape())} has {count_in} elements,"
                f" not a multiple of the {known} of result {shape_str(shape)}"
            )
        shape[shape.index(DYN)] = count_in // known
        return [tensor_of(out.get_element_type(), shape)]


@irdl_op_definition
class TransposeOp(GraphOperation):
    """Permute dims: result dim i is input dim `permutation[i]`.

    `%y = graph.transpose %x {permutation = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>`
    """

    name = "graph.transpose"
    input = operand_def(TensorType)
    permutation = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), TransposeCanonicalization())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, "graph.transpose input")
        perm = ints(self.permutation)
        if sorted(perm) != list(range(len(x))):
            raise VerifyException(f"graph.transpose: permutation {list(perm)} is not a permutation of {len(x)} dims")
        return [tensor_of(dtype_of(self.input, "input"), [x[p] for p in perm])]


@irdl_op_definition
class ConcatOp(GraphOperation):
    """Join tensors along `axis`; other dims must agree.

    `%y = graph.concat %a, %b {axis = 1 : i64} : (tensor<1x64x8x8xf32>, tensor<1x32x8x8xf32>) -> tensor<1x96x8x8xf32>`
    """

    name = "graph.concat"
    inputs = var_operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), FoldsIntegerConstants())

    def infer_result_types(self) -> Sequence[TensorT]:
        if not self.inputs:
            raise VerifyException("graph.concat: needs at least one input")
        shapes = [shape_of(v, f"graph.concat input #{i}") for i, v in enumerate(self.inputs)]
        rank = len(shapes[0])
        axis = normalize_axis(self.axis.value.data, rank, self.name)
        out = list(shapes[0])
        for i, shape in enumerate(shapes[1:], start=1):
            if len(shape) != rank or any(
                not dims_compatible(a, b) for d, (a, b) in enumerate(zip(shape, shapes[0], strict=True)) if d != axis
            ):
                raise VerifyException(
                    f"graph.concat: input #{i} shape {shape_str(shape)}"
                    f" does not match {shape_str(shapes[0])} off axis {axis}"
                )
        along = [s[axis] for s in shapes]
        out[axis] = sum(along) if DYN not in along else DYN
        if DYN in along and all(isinstance(d, SymbolicDim) for d in along if d == DYN):
            # A KV cache grown by a step: [?past] and [1] make `past+1`.
            names = [d.symbol for d in along if isinstance(d, SymbolicDim)]
            out[axis] = SymbolicDim(sum_name(sum(d for d in along if d != DYN), names))
        return [tensor_of(dtype_of(self.inputs[0], "input"), out)]


@irdl_op_definition
class SplitOp(GraphOperation):
    """Cut `input` along `axis` into pieces of the given `sizes`.

    `%a, %b = graph.split %x {axis = 1 : i64, sizes = array<i64: 2, 6>}
         : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x6xf32>)`
    """

    name = "graph.split"
    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    sizes = prop_def(DenseArrayBase)
    outputs = var_result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, "graph.split input")
        axis = normalize_axis(self.axis.value.data, len(x), self.name)
        sizes = ints(self.sizes)
        if x[axis] != DYN and sum(sizes) != x[axis]:
            raise VerifyException(
                f"graph.split: sizes {list(sizes)} do not add up to dim {axis} of input {shape_str(x)}"
            )
        dtype = dtype_of(self.input, "input")
        return [tensor_of(dtype, [size if i == axis else d for i, d in enumerate(x)]) for size in sizes]


def _slice_length(start: int, end: int, step: int) -> int:
    return len(range(start, end, step))


@irdl_op_definition
class SliceOp(GraphOperation):
    """Strided slice: along each dim, the elements `range(starts[i], ends[i], steps[i])`.

    The bounds are already clamped to the dim (as Python's slice.indices does), so a negative
    step with end -1 runs down to index 0. A dynamic dim is taken whole: start 0, a negative end (to the end), step 1.

    `%y = graph.slice %x {starts = array<i64: 0, 1>, ends = array<i64: 4, 8>, steps = array<i64: 1, 2>}
         : (tensor<4x8xf32>) -> tensor<4x4xf32>`
    """

    name = "graph.slice"
    input = operand_def(TensorType)
    starts = prop_def(DenseArrayBase)
    ends = prop_def(DenseArrayBase)
    steps = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), FoldsIntegerConstants())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, "graph.slice input")
        starts, ends, steps = ints(self.starts), ints(self.ends), ints(self.steps)
        if not len(starts) == len(ends) == len(steps) == len(x):
            raise VerifyException(f"graph.slice: starts, ends and steps need {len(x)} entries each (the input rank)")
        if 0 in steps:
            raise VerifyException(f"graph.slice: steps {list(steps)} contain 0")
        for axis, (d, s, e, st) in enumerate(zip(x, starts, ends, steps, strict=True)):
            if d == DYN and ((s, st) != (0, 1) or e >= 0):
                raise VerifyException(
                    f"graph.slice: dim {axis} is dynamic ({dim_str(d)}): only all of it can be taken"
                    f" (start 0, a negative end, step 1), not {s}:{e}:{st}"
                )
        out = [d if d == DYN else _slice_length(s, e, st) for d, s, e, st in zip(x, starts, ends, steps, strict=True)]
        return [tensor_of(dtype_of(self.input, "input"), out)]


@irdl_op_definition
class SliceScatterOp(GraphOperation):
    """The input with its strided slice `range(starts[i], ends[i], steps[i])` along each dim replaced by `update`
    (torch's slice_scatter, the functional form of `x[:, 1:3] = y`). Steps are positive; bounds are clamped.

    `%y = graph.slice_scatter %x, %u {starts = array<i64: 0, 1>, ends = array<i64: 4, 8>, steps = array<i64: 1, 2>}
         : (tensor<4x8xf32>, tensor<4x4xf32>) -> tensor<4x8xf32>`
    """

    name = "graph.slice_scatter"
    input = operand_def(TensorType)
    update = operand_def(TensorType)
    starts = prop_def(DenseArrayBase)
    ends = prop_def(DenseArrayBase)
    steps = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x, u = shape_of(self.input, "graph.slice_scatter input"), shape_of(self.update, "graph.slice_scatter update")
        starts, ends, steps = ints(self.starts), ints(self.ends), ints(self.steps)
        if not len(starts) == len(ends) == len(steps) == len(x) == len(u):
            raise VerifyException(
                f"graph.slice_scatter: starts, ends, steps and update need {len(x)} entries each (the input rank)"
            )
        if any(step < 1 for step in steps):
            raise VerifyException(f"graph.slice_scatter: steps {list(steps)} must be positive")
        window = [
            DYN if d == DYN else _slice_length(s, e, st) for d, s, e, st in zip(x, starts, ends, steps, strict=True)
        ]
        if not all(dims_compatible(w, d) for w, d in zip(window, u, strict=True)):
            raise VerifyException(
                f"graph.slice_scatter: update {shape_str(u)} does not match the slice {shape_str(window)}"
            )
        if dtype_of(self.update, "update") != dtype_of(self.input, "input"):
            raise VerifyException(
                f"graph.slice_scatter: update element type {dtype_of(self.update, 'update')}"
                f" differs from input {dtype_of(self.input, 'input')}"
            )
        return [tensor_type(self.input, "input")]


def _check_indices(op: str, value: SSAValue) -> None:
    dtype = dtype_of(value, f"{op} indices")
    if not isinstance(dtype, IntegerType) or dtype.width.data not in (32, 64):
        raise VerifyException(f"{op}: indices must be i32 or i64, got {dtype}")


@irdl_op_definition
class GatherOp(GraphOperation):
    """Take slices of `input` along `axis` at `indices` (ONNX Gather, torch index_select).

    The result shape is input[:axis] + indices + input[axis+1:].

    `%y = graph.gather %x, %i {axis = 0 : i64} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>`
    """

    name = "graph.gather"
    input = operand_def(TensorType)
    indices = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(ReadsAtDataIndices(), FoldsIntegerConstants())

    def infer_result_types(self) -> Sequence[TensorT]:
        x, idx = shape_of(self.input, "graph.gather input"), shape_of(self.indices, "graph.gather indices")
        _check_indices(self.name, self.indices)
        axis = normalize_axis(self.axis.value.data, len(x), self.name)
        return [tensor_of(dtype_of(self.input, "input"), [*x[:axis], *idx, *x[axis + 1 :]])]


@irdl_op_definition
class GatherElementsOp(GraphOperation):
    """out[i][j] = input[index[i][j]][j] along `axis` (torch.gather, ONNX GatherElements).

    `%y = graph.gather_elements %x, %i {axis = 1 : i64} : (tensor<2x5xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>`
    """

    name = "graph.gather_elements"
    input = operand_def(TensorType)
    indices = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(ReadsAtDataIndices())

    def infer_result_types(self) -> Sequence[TensorT]:
        x, idx = shape_of(self.input, "graph.gather_elements input"), shape_of(self.indices, "indices")
        _check_indices(self.name, self.indices)
        if len(x) != len(idx):
            raise VerifyException(f"graph.gather_elements: indices rank {len(idx)} differs from input rank {len(x)}")
        normalize_axis(self.axis.value.data, len(x), self.name)
        return [tensor_of(dtype_of(self.input, "input"), idx)]


@irdl_op_definition
class ScatterElementsOp(GraphOperation):
    """The input with out[i][index[i][j]] = updates[i][j] along `axis` (ONNX ScatterElements, torch scatter and
    scatter_reduce), or combined with what is there by `reduction`: add, mul, max or min. Negative indices count
    from the end. Where indices repeat with reduction none, the update last in row-major order wins, as in ONNX's
    reference.

    `%y = graph.scatter_elements %x, %i, %u {axis = 1 : i64, reduction = "add"}
         : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x5xf32>`
    """

    name = "graph.scatter_elements"
    input = operand_def(TensorType)
    indices = operand_def(TensorType)
    updates = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    reduction = prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(ReadsAtDataIndices())

    REDUCTIONS: ClassVar[tuple[str, ...]] = ("none", "add", "mul", "max", "min")

    def scatter_axis(self) -> int:
        return normalize_axis(self.axis.value.data, len(shape_of(self.input, f"{self.name} input")), self.name)

    def infer_result_types(self) -> Sequence[TensorT]:
        x, idx = shape_of(self.input, "graph.scatter_elements input"), shape_of(self.indices, "indices")
        updates = shape_of(self.updates, "updates")
        _check_indices(self.name, self.indices)
        if self.reduction.data not in self.REDUCTIONS:
            raise VerifyException(
                "graph.scatter_elements: reduction must be one of none, add, mul, max, min,"
                f" got {self.reduction.data!r}"
            )
        if not x:
            raise VerifyException("graph.scatter_elements: input must have rank >= 1")
        if len(x) != len(idx):
            raise VerifyException(f"graph.scatter_elements: indices rank {len(idx)} differs from input rank {len(x)}")
        if len(updates) != len(idx) or not all(dims_compatible(a, b) for a, b in zip(updates, idx, strict=True)):
            raise VerifyException(
                f"graph.scatter_elements: updates {shape_str(updates)} differ from indices {shape_str(idx)}"
            )
        axis = self.scatter_axis()
        if any(i != DYN and d != DYN and i > d for a, (i, d) in enumerate(zip(idx, x, strict=True)) if a != axis):
            raise VerifyException(
                f"graph.scatter_elements: indices {shape_str(idx)} exceed input {shape_str(x)} off axis {axis}"
            )
        if dtype_of(self.updates, "updates") != dtype_of(self.input, "input"):
            raise VerifyException(
                f"graph.scatter_elements: updates element type {dtype_of(self.updates, 'updates')}"
                f" differs from input {dtype_of(self.input, 'input')}"
            )
        return [tensor_type(self.input, "input")]


@irdl_op_definition
class PadOp(GraphOperation):
    """Pad every dim by `pads` (all leading pads, then all trailing) in mode constant, reflect, replicate or wrap
    (NumPy's: the input repeats periodically). Negative pads crop first.

    `%y = graph.pad %x {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>, mode = "constant", value = 0.0 : f64}
         : (tensor<1x3x4x4xf32>) -> tensor<1x3x6x6xf32>`
    """

    name = "graph.pad"
    input = operand_def(TensorType)
    pads = prop_def(DenseArrayBase)
    mode = prop_def(StringAttr)
    value = prop_def(FloatAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    MODES: ClassVar[tuple[str, ...]] = ("constant", "reflect", "replicate", "wrap")

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, "graph.pad input")
        pads = ints(self.pads)
        if self.mode.data not in self.MODES:
            raise VerifyException(f"graph.pad: mode must be one of {', '.join(self.MODES)}, got {self.mode.data!r}")
        if len(pads) != 2 * len(x):
            raise VerifyException(f"graph.pad: pads has {len(pads)} entries, expected {2 * len(x)} for rank {len(x)}")
        rank = len(x)
        out = [DYN if d == DYN else d + pads[i] + pads[i + rank] for i, d in enumerate(x)]
        if any(d != DYN and d < 0 for d in out):
            raise VerifyException(f"graph.pad: pads {list(pads)} remove more than input {shape_str(x)} has")
        return [tensor_of(dtype_of(self.input, "input"), out)]


@irdl_op_definition
class ExpandOp(GraphOperation):
    """Broadcast `input` to the result's shape (NumPy rules; torch expand, ONNX Expand).

    `%y = graph.expand %x : (tensor<1x4xf32>) -> tensor<3x4xf32>`
    """

    name = "graph.expand"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), ExpandCanonicalization())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, "graph.expand input")
        out = tensor_type(self.result, "graph.expand result")
        broadcast = broadcast_shapes([x, out.get_shape()], "graph.expand")
        if len(x) > len(out.get_shape()) or tuple(broadcast) != tuple(
            b if o == DYN else o for b, o in zip(broadcast, out.get_shape(), strict=True)
        ):
            raise VerifyException(
                f"graph.expand: input {shape_str(x)} does not broadcast to {shape_str(out.get_shape())}"
            )
        return [tensor_of(dtype_of(self.input, "input"), out.get_shape())]


@irdl_op_definition
class TileOp(GraphOperation):
    """Repeat the input `repeats[i]` times along dim i.

    `%y = graph.tile %x {repeats = array<i64: 2, 1>} : (tensor<3x4xf32>) -> tensor<6x4xf32>`
    """

    name = "graph.tile"
    input = operand_def(TensorType)
    repeats = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        x = shape_of(self.input, "graph.tile input")
        repeats = ints(self.repeats)
        if len(repeats) != len(x):
            raise VerifyException(f"graph.tile: repeats has {len(repeats)} entries, expected {len(x)}")
        return [
            tensor_of(
                dtype_of(self.input, "input"),
                [DYN if d == DYN else d * r for d, r in zip(x, repeats, strict=True)],
            )
        ]


@irdl_op_definition
class IotaOp(GraphOperation):
    """0, 1, ..., n - 1, where n is the size of `like`'s dim `axis`: positions along a dim whose size may be dynamic
    (`torch.arange(x.shape[1])`, a transformer's position ids). Only `like`'s shape is read.

    `%p = graph.iota %x {axis = 1 : i64} : (tensor<2x?xi64, #graph.dims<["", "seq"]>>) -> tensor<?xi64, …>`
    """

    name = "graph.iota"
    like = operand_def(TensorType)
    axis = prop_def(IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def infer_result_types(self) -> Sequence[TensorT]:
        shape = shape_of(self.like, "graph.iota like")
        axis = normalize_axis(self.axis.value.data, len(shape), "graph.iota")
        element = dtype_of(self.result, "graph.iota result")
        if not isinstance(element, IntegerType):
            raise VerifyException(f"graph.iota: result must be integers, got {element}")
        return [tensor_of(element, [shape[axis]])]


TENSOR_OPS = [
    ConcatOp, ConstantOp, ExpandOp, GatherElementsOp, GatherOp, IotaOp, PadOp, ReshapeOp, ScatterElementsOp, SliceOp,
    SliceScatterOp, SplitOp, TileOp, TransposeOp,
]  # fmt: skip
