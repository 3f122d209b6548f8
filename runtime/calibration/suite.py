"""The calibration suite: the kernels whose profiled times the fit of the efficiency factors matches.

GEMMs, convolutions, depthwise convolutions, elementwise, broadcast affine, transpose, softmax, normalization, 2-D
and 3-D pooling, concatenation, embedding bags, and a training step's batch norm, max-pool gradient and embedding
gradient, each family at a large and a small size, so that the fixed costs
and the rates separate; two chains of small calls of three library functions in turn, near and far apart in
traffic, for a call's fixed cost warm and cold; and tiny calls of the library functions models call most, each run
back to back, for each one's own warm call. The suite's shapes are not the benchmark models' own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import zip_longest

from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Attribute, SSAValue

from gnomon.cost.fit import Measured
from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.elementwise import GeluOp, ReluOp, SigmoidOp
from gnomon.dialects.graph.nn import SoftmaxOp
from gnomon.runtime.calibration import CalibrationError
from gnomon.runtime.calibration.programs import (
    Program,
    Shape,
    affine_relu,
    attention,
    avg_pool,
    batch_norm_train,
    concat,
    conv,
    embedding,
    embedding_bag,
    embedding_bag_grad,
    global_avg_pool,
    layer_norm,
    linear,
    lrn_scale,
    matmul,
    max_pool,
    max_pool_grad,
    same_shape,
    slice_columns,
    transpose,
    weight,
)

__all__ = ["CALL_BOUND", "PROBE_RUNS", "Kernel", "Suite", "fitted_launches", "probe_launches", "suite_program"]

CALL_BOUND = ("max_pool_small", "global_avg_pool", "concat_small", "layer_norm_small", "softmax_small")
"""The suite's library calls whose time is mostly the call's fixed cost."""


@dataclass(frozen=True)
class Kernel:
    """One kernel of the suite: its inputs, and how its graph ops are built on them."""

    name: str
    inputs: tuple[tuple[str, Shape], ...]
    """Each input's name (after the kernel's: `conv3x3_x`) and shape."""
    build: Callable[[Program, Sequence[SSAValue]], SSAValue]
    reads_weights: bool = False
    """A GEMM, convolution or embedding bag: its weights or table, read once per inference, are not in cache in a
    model either, so it runs once."""
    launches: int = 1
    """Kernels it launches (a chain of calls); every one is fitted."""


def _elementwise(name: str, op: str, dims: Shape) -> Kernel:
    ops: dict[str, tuple[type[GraphOperation], dict[str, Attribute]]] = {
        "relu": (ReluOp, {}),
        "gelu": (GeluOp, {"approximate": StringAttr("none")}),
        "sigmoid": (SigmoidOp, {}),
        "softmax": (SoftmaxOp, {"axis": IntegerAttr(1, i64)}),
    }
    op_type, properties = ops[op]
    return Kernel(name, (("x", dims),), lambda p, a: same_shape(p, name, op_type, a[0], properties))


def _transpose(name: str, dims: Shape, permutation: Shape) -> Kernel:
    return Kernel(name, (("x", dims),), lambda p, a: transpose(p, name, a[0], permutation))


def _affine(name: str, dims: Shape) -> Kernel:
    """x * scale + shift, then relu, with per-channel operands: an unfolded batch norm."""
    channel = (dims[1], 1, 1)
    return Kernel(name, (("x", dims), ("s", channel), ("b", channel)), lambda p, a: affine_relu(p, name, *a))


def _lrn(name: str, dims: Shape) -> Kernel:
    return Kernel(name, (("p", dims), ("x", dims)), lambda p, a: lrn_scale(p, name, *a))


def _linear(name: str, m: int, n: int, k: int) -> Kernel:
    inputs = (("x", (m, k)), ("w", (n, k)), ("b", (n,)))
    return Kernel(name, inputs, lambda p, a: linear(p, name, *a), reads_weights=True)


def _conv(name: str, x: Shape, w: Shape, stride: int, pad: int, groups: int = 1, layout: str | None = None) -> Kernel:
    """A convolution whose weight is a constant, as a model's: the runtime packs it once where that pays."""

    def build(p: Program, a: Sequence[SSAValue]) -> SSAValue:
        return conv(p, name, a[0], weight(p, f"{name}_w", w), stride, pad, groups, layout)

    return Kernel(name, (("x", x),), build, reads_weights=True)


def _max_pool(name: str, dims: Shape) -> Kernel:
    """A 3x3 stride-2 max, as ResNet's stem pools."""
    return Kernel(name, (("x", dims),), lambda p, a: max_pool(p, name, a[0], (3, 3), 2, 1))


def _avg_pool(name: str, dims: Shape, kernel: Shape, stride: int, pad: int, count_include_pad: bool) -> Kernel:
    return Kernel(name, (("x", dims),), lambda p, a: avg_pool(p, name, a[0], kernel, stride, pad, count_include_pad))


def _global_avg_pool(name: str, dims: Shape) -> Kernel:
    return Kernel(name, (("x", dims),), lambda p, a: global_avg_pool(p, name, a[0]))


def _concat(name: str, dims: Shape, parts: int) -> Kernel:
    return Kernel(name, tuple((f"x{i}", dims) for i in range(parts)), lambda p, a: concat(p, name, a))


def _layer_norm(name: str, rows: int, columns: int) -> Kernel:
    inputs = (("x", (rows, columns)), ("g", (columns,)), ("b", (columns,)))
    return Kernel(name, inputs, lambda p, a: layer_norm(p, name, *a))


def _call_chain(name: str, rows: int, width: int, rounds: int) -> Kernel:
    """`rounds` of linear, softmax and layer norm on rows x width: small calls of three library functions in turn,
    as a recurrent cell or a small transformer makes them, so that each call finds its function's code as far out in
    the caches as the traffic of the two calls between pushed it (`gnomon.cost.calls.library_call_s`)."""
    inputs = (("x", (rows, width)), ("w", (width, width)), ("b", (width,)), ("g", (width,)))

    def build(p: Program, a: Sequence[SSAValue]) -> SSAValue:
        x, w, b, g = a
        softmax: dict[str, Attribute] = {"axis": IntegerAttr(1, i64)}
        for i in range(rounds):
            x = linear(p, f"{name}_linear{i}", x, w, b)
            x = same_shape(p, f"{name}_softmax{i}", SoftmaxOp, x, softmax)
            x = layer_norm(p, f"{name}_norm{i}", x, g, b)
        return x

    return Kernel(name, inputs, build, reads_weights=True, launches=3 * rounds)


def _embedding_bag(name: str, rows: int, dim: int, bags: int, pooling: int) -> Kernel:
    inputs = (("t", (rows, dim)),)
    return Kernel(name, inputs, lambda p, a: embedding_bag(p, name, a[0], bags, pooling), reads_weights=True)


def _batch_norm_train(name: str, dims: Shape) -> Kernel:
    inputs = (("x", dims), ("g", (dims[1],)), ("b", (dims[1],)))
    return Kernel(name, inputs, lambda p, a: batch_norm_train(p, name, *a))


def _max_pool_grad(name: str, dims: Shape) -> Kernel:
    """The gradient of a 3x3 stride-2 max pool (ResNet's stem) with respect to its input of `dims`."""
    pooled = (dims[0], dims[1], (dims[2] - 1) // 2 + 1, (dims[3] - 1) // 2 + 1)
    inputs = (("dy", pooled), ("x", dims))
    return Kernel(name, inputs, lambda p, a: max_pool_grad(p, name, a[0], a[1], (3, 3), 2, 1))


def _embedding_bag_grad(name: str, rows: int, dim: int, bags: int, pooling: int) -> Kernel:
    return Kernel(name, (("dy", (bags, dim)),), lambda p, a: embedding_bag_grad(p, name, a[0], rows, pooling))


def _quick_kernels() -> tuple[list[Kernel], list[Kernel]]:
    generated = [_elementwise("relu", "relu", (1, 16, 28, 28)), _affine("affine", (1, 16, 28, 28))]
    library = [_linear("linear", 64, 256, 256), _conv("conv", (1, 16, 28, 28), (16, 16, 3, 3), 1, 1)]
    return generated, library


def _generated_kernels() -> list[Kernel]:
    return [
        _elementwise("relu", "relu", (1, 64, 56, 56)),
        _elementwise("gelu", "gelu", (256, 1024)),
        _elementwise("sigmoid", "sigmoid", (1, 128, 28, 28)),
        _transpose("transpose", (512, 2048), (1, 0)),
        _elementwise("softmax", "softmax", (256, 1000)),
        _affine("affine", (1, 128, 28, 28)),
        _affine("affine_large", (1, 64, 112, 112)),
        _lrn("lrn", (1, 96, 27, 27)),
        _elementwise("relu_small", "relu", (1, 64, 14, 14)),
        _affine("affine_small", (1, 32, 14, 14)),
        _transpose("transpose_small", (64, 256), (1, 0)),
        _transpose("permute", (4, 128, 8, 32), (0, 2, 1, 3)),  # attention's head split: rows of 32 move
        # 64 MB in and out: past any last cache, an elementwise stream's DRAM rate (`stream_dram`), apart from a
        # matrix-vector product's weights (`weights_dram`).
        _elementwise("relu_dram", "relu", (16, 1024, 1024)),
    ]


def _library_kernels() -> list[Kernel]:
    return [
        _linear("linear_large", 256, 1024, 1024),
        _linear("linear_tall", 1024, 256, 256),  # a transformer's projection: small weights, many rows
        _linear("linear_wide", 64, 2048, 512),
        _linear("linear_narrow", 1024, 16, 1024),  # a classifier head: A's packing counts
        _linear("linear_shallow", 2048, 512, 13),  # DLRM's dense features: the K overhead counts
        _linear("linear_small", 16, 256, 256),
        _linear("linear_vector", 1, 4096, 4096),  # batch 1: a matrix-vector product, bound by its weights' traffic
        _linear("linear_vector_small", 1, 2048, 1536),
        _conv("conv3x3", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1),
        _conv("conv1x1", (1, 256, 56, 56), (64, 256, 1, 1), 1, 0),
        _conv("conv7x7", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3),
        _conv("conv_deep", (1, 256, 14, 14), (256, 256, 3, 3), 1, 1),
        _conv("conv_large", (1, 128, 56, 56), (128, 128, 3, 3), 1, 1),
        _conv("conv_wide", (1, 512, 7, 7), (512, 512, 3, 3), 1, 1),  # ResNet's last stage: 9.4 MB of weights
        _conv("depthwise", (1, 128, 28, 28), (128, 1, 3, 3), 1, 1, groups=128),
        _conv("depthwise_small", (1, 32, 14, 14), (32, 1, 3, 3), 1, 1, groups=32),  # the call, not the stencil
        _conv("depthwise7x7", (2, 96, 28, 28), (96, 1, 7, 7), 1, 3, groups=96),  # ConvNeXt's
        _conv("conv_small", (1, 32, 14, 14), (32, 32, 3, 3), 1, 1),
        _conv("depthwise_large", (1, 96, 112, 112), (96, 1, 3, 3), 1, 1, groups=96),  # MobileNet's first
        # Channels-last activations (`graph-layout`): no reorder around the library's kernel. Beside their
        # channels-first twins, they set the reorders' rate (`reorder`) apart from the kernels'.
        _conv("conv3x3_nhwc", (1, 56, 56, 64), (64, 64, 3, 3), 1, 1, layout="nhwc"),
        _conv("conv_deep_nhwc", (1, 14, 14, 256), (256, 256, 3, 3), 1, 1, layout="nhwc"),
        _conv("depthwise_nhwc", (1, 28, 28, 128), (128, 1, 3, 3), 1, 1, groups=128, layout="nhwc"),
        _conv("depthwise_nhwc_large", (1, 112, 112, 96), (96, 1, 3, 3), 1, 1, groups=96, layout="nhwc"),
        _conv("grouped1x1_nhwc", (1, 28, 28, 240), (240, 60, 1, 1), 1, 0, groups=4, layout="nhwc"),  # ShuffleNet's
        # Small ones, whose time is mostly the call's (`channels_last_call_s`), as `conv_small` and
        # `depthwise_small` are for channels-first calls: without them the fit trades the call against the kernels.
        _conv("conv_small_nhwc", (1, 14, 14, 32), (32, 32, 3, 3), 1, 1, layout="nhwc"),
        _conv("depthwise_small_nhwc", (1, 14, 14, 32), (32, 1, 3, 3), 1, 1, groups=32, layout="nhwc"),
        _max_pool("max_pool", (1, 64, 112, 112)),
        _max_pool("max_pool_small", (1, 64, 28, 28)),
        _avg_pool("avg_pool", (1, 96, 56, 56), (3, 3), 1, 1, True),  # as Inception's branches pool
        _avg_pool("avg_pool_2x2", (1, 128, 56, 56), (2, 2), 2, 0, False),  # as DenseNet's transitions pool
        # A 3-D average over 5 channels: a local response norm's pool (AlexNet, GoogLeNet) as torch-mlir lowers it.
        _avg_pool("channel_pool", (1, 1, 68, 40, 40), (5, 1, 1), 1, 0, True),
        _global_avg_pool("global_avg_pool", (1, 2048, 7, 7)),
        _concat("concat", (1, 128, 28, 28), 3),
        _concat("concat_small", (1, 32, 14, 14), 2),
        _layer_norm("layer_norm", 1024, 256),
        # Tiny library calls: what they take is almost all the call's fixed cost (`library_call_s`).
        _layer_norm("layer_norm_small", 64, 192),
        _elementwise("softmax_small", "softmax", (4, 500)),
        _call_chain("call_chain", 1, 64, 3),  # 1.5-18 KB between calls of a function: L1
        _call_chain("call_chain_wide", 16, 512, 3),  # 0.13-1.2 MB between calls: L2 and L3
        _embedding_bag("embedding_bag", 60_000, 32, 512, 15),
        _embedding_bag("embedding_bag_small", 60_000, 32, 64, 15),
        # A training step's own kernels (`norm_train`, `pool_grad`, `index_add`).
        _batch_norm_train("batch_norm_train", (8, 64, 28, 28)),
        _batch_norm_train("batch_norm_train_small", (2, 32, 14, 14)),
        _max_pool_grad("max_pool_grad", (4, 64, 56, 56)),
        _max_pool_grad("max_pool_grad_small", (1, 32, 28, 28)),
        _embedding_bag_grad("embedding_bag_grad", 60_000, 32, 512, 15),
        _embedding_bag_grad("embedding_bag_grad_small", 8_000, 32, 64, 15),
    ]


PROBE_RUNS = 3
"""Runs of each call probe back to back: the first after other kernels, the others warm."""

Build = Callable[[Program, str, Sequence[SSAValue]], SSAValue]
"""A probe's op on a program, named, on its inputs."""


def _call_probes() -> list[Kernel]:
    """A tiny instance of each library function models call often, whose time is all the call's fixed cost: ATen's
    functions differ tenfold in it (here a slice's 3 us, a softmax's 5, a layer norm's 20, an embedding bag's 30; a
    fused attention's, which `graph-fuse` weighs against the ops written out),
    which one fitted factor cannot say (`gnomon.cost.fit.call_warm_costs`)."""

    def one(name: str, inputs: tuple[tuple[str, Shape], ...], build: Build) -> Kernel:
        return Kernel(name, inputs, lambda p, a: build(p, name, a))

    softmax: dict[str, Attribute] = {"axis": IntegerAttr(1, i64)}
    return [
        one("probe_linear", (("x", (4, 32)), ("w", (32, 32)), ("b", (32,))), lambda p, n, a: linear(p, n, *a)),
        one("probe_matmul", (("a", (2, 8, 16)), ("b", (2, 16, 8))), lambda p, n, a: matmul(p, n, *a)),
        one(
            "probe_attention",
            (("q", (1, 2, 8, 16)), ("k", (1, 2, 8, 16)), ("v", (1, 2, 8, 16))),
            lambda p, n, a: attention(p, n, *a),
        ),
        one("probe_layer_norm", (("x", (4, 32)), ("g", (32,)), ("b", (32,))), lambda p, n, a: layer_norm(p, n, *a)),
        one("probe_softmax", (("x", (4, 32)),), lambda p, n, a: same_shape(p, n, SoftmaxOp, a[0], softmax)),
        one("probe_concat", (("a", (1, 4, 4, 4)), ("b", (1, 4, 4, 4))), lambda p, n, a: concat(p, n, a)),
        one("probe_slice", (("x", (8, 32)),), lambda p, n, a: slice_columns(p, n, a[0], 8, 24)),
        one("probe_embedding", (("t", (64, 16)),), lambda p, n, a: embedding(p, n, a[0], 8)),
        one("probe_embedding_bag", (("t", (64, 16)),), lambda p, n, a: embedding_bag(p, n, a[0], 4, 2)),
        one("probe_mean", (("x", (1, 16, 4, 4)),), lambda p, n, a: global_avg_pool(p, n, a[0])),
        one("probe_max_pool", (("x", (1, 4, 8, 8)),), lambda p, n, a: max_pool(p, n, a[0], (3, 3), 2, 1)),
        # A 1x1 convolution: the runtime's BLAS product per image (`aten.mm`).
        one("probe_mm", (("x", (1, 8, 4, 4)), ("w", (8, 8, 1, 1))), lambda p, n, a: conv(p, n, a[0], a[1], 1, 0)),
    ]


@dataclass(frozen=True)
class Suite:
    """The calibration suite: one program, and which of its launches the fit uses."""

    module: ModuleOp
    """The graph program; `gnomon.runtime.calibration.profile.load` lowers a copy."""
    fitted: tuple[bool, ...]
    """Per launch, in order: whether the fit uses it (not the call probes)."""
    probes: tuple[bool, ...] = ()
    """Per launch, in order: True for the warm runs of the call probes (`_call_probes`), which the factors' fit
    leaves out; empty: none."""
    warm: tuple[bool, ...] = ()
    """Per launch, in order: True for one that runs twice in a row, timed the second time
    (`gnomon.runtime.calibration.profile.profile_suite`); empty: none."""


def suite_program(quick: bool) -> Suite:
    """The calibration suite: its generated and library kernels alternate, as in a model (a kernel's time depends on
    what ran before it: a parallel kernel after a serial one waits for the thread team to wake). Every kernel reads
    its own inputs and returns its result, so none fuse.

    A model's activations are in cache when the next kernel reads them: their producer just wrote them; and its
    planned arena hands a kernel a buffer that recent kernels used. So a kernel runs twice in a row (`Suite.warm`)
    and the fit takes the second run, with its inputs and its output in cache, except:
    - GEMMs, convolutions and embedding bags (`Kernel.reads_weights`), which run once;
    - the small library calls (`CALL_BOUND`): their time is mostly the call's fixed cost, which depends on the
      kernel before, as in a model. They are built twice and the fit takes both: the first, after another kernel,
      prices a call (`library_call_s`); the second, straight after itself, a warm one (`library_call_warm_s`).

    The call probes (`_call_probes`) close the program, each `PROBE_RUNS` times; the fit leaves them out."""
    generated, library = _quick_kernels() if quick else (_generated_kernels(), _library_kernels())
    program = Program()
    fitted: list[bool] = []
    warm: list[bool] = []
    for kernel in (kernel for pair in zip_longest(library, generated) for kernel in pair if kernel is not None):
        inputs = [program.argument(f"{kernel.name}_{name}", dims) for name, dims in kernel.inputs]
        program.results.append(kernel.build(program, inputs))
        if kernel.reads_weights:
            fitted += [True] * kernel.launches
            warm += [False] * kernel.launches
        elif kernel.name in CALL_BOUND:
            program.results.append(_again(program, kernel, inputs))
            fitted += [True, True]
            warm += [False, False]
        else:
            fitted.append(True)
            warm.append(True)
    probes = [False] * len(fitted)
    for kernel in [] if quick else _call_probes():
        inputs = [program.argument(f"{kernel.name}_{name}", dims) for name, dims in kernel.inputs]
        program.results.append(kernel.build(program, inputs))
        program.results += [_again(program, kernel, inputs) for _ in range(PROBE_RUNS - 1)]
        fitted += [False] * PROBE_RUNS
        warm += [False] * PROBE_RUNS
        probes += [False] + [True] * (PROBE_RUNS - 1)
    return Suite(program.module(), tuple(fitted), tuple(probes), tuple(warm))


def _again(program: Program, kernel: Kernel, inputs: Sequence[SSAValue]) -> SSAValue:
    """`kernel` built again on the same inputs, every value it defines named `..._again`."""
    last = program.block.last_op
    result = kernel.build(program, inputs)
    op = last.next_op if last is not None else program.block.first_op
    while op is not None:
        op.results[0].name_hint = f"{op.results[0].name_hint}_again"
        op = op.next_op
    return result


def fitted_launches(suite: Suite, measured: Sequence[Measured]) -> list[Measured]:
    """The launches of a profiled run of `suite` that the fit uses."""
    if len(measured) != len(suite.fitted):
        raise CalibrationError(f"the calibration suite ran {len(measured)} launches, expected {len(suite.fitted)}")
    return [m for m, fit in zip(measured, suite.fitted, strict=True) if fit]


def probe_launches(suite: Suite, measured: Sequence[Measured]) -> list[Measured]:
    """The warm runs of the call probes in a profiled run of `suite` (`fitted_launches` checked its length)."""
    return [m for m, probe in zip(measured, suite.probes, strict=False) if probe]
