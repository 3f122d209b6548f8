"""The static memory planner on the onnx package's light networks: arena size against the liveness lower bound.

Each model's schedule is its graph function's body in order: every op but constants, views and the
return is one step, and each result of a step is one buffer of (elements x element bytes). A buffer
lives until the step of its last user; a function result lives to the end (last = number of steps).
`graph.reshape` is a view of contiguous data, so it is merged into its source: the source lives as
long as any user of the view. Function arguments (the model's inputs) and constants (its weights)
are bound by the caller outside the arena, so they are not buffers, nor are views of them.

An elementwise step (unary, binary, inference batch norm) offers to reuse in place the first of its
inputs with the result's exact type whose buffer dies at this step; `plan` decides whether to take it.

Prints, per model: buffers, in-place reuses taken, the lower bound and the arena in MB (2^20 bytes),
their ratio, and the median time of `plan` over `--repeat` runs. Every plan is checked by `verify`.
A second table gives the same figures for the program `gnomon.compile` really runs: its schedule is
the kernel launches after fusion (fewer, larger steps), read back from the rt function with
`plan_of` and checked by `verify_plan`.

    python bench/memory_plan.py [--repeat 5] [--no-inplace]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

from xdsl.dialects import func
from xdsl.dialects.builtin import FixedBitwidthType, IntegerAttr, ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue

import gnomon
from gnomon.bundled import light_models
from gnomon.dialects import rt
from gnomon.dialects.graph.base import GraphOperation
from gnomon.dialects.graph.elementwise import BinaryOp, UnaryOp
from gnomon.dialects.graph.nn import BatchNormOp
from gnomon.dialects.graph.tensor import ConstantOp, ReshapeOp
from gnomon.errors import GnomonError
from gnomon.passes.kernel_to_rt import plan_of, rt_functions, verify_plan
from gnomon.passes.kernel_to_rt.memory_plan import Buffer, plan, verify

VIEW_OPS = (ReshapeOp,)
ELEMENTWISE_OPS = (UnaryOp, BinaryOp, BatchNormOp)
MB = 2**20


def buffer_bytes(value: SSAValue) -> int:
    value_type = value.type
    if not isinstance(value_type, TensorType):
        raise GnomonError(f"memory plan bench: a step's result has type {value_type}, not a tensor")
    shape = value_type.get_shape()
    element = value_type.get_element_type()
    if any(d < 0 for d in shape) or not isinstance(element, FixedBitwidthType):
        raise GnomonError(f"memory plan bench: {value_type} has no static size")
    return math.prod(shape) * ((element.bitwidth + 7) // 8)


def model_buffers(module: ModuleOp, inplace: bool = True) -> list[Buffer]:
    """The buffers of the schedule that the graph function's body is, as the module docstring describes."""
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    source: dict[SSAValue, SSAValue] = {}  # a step's result, or a view of one -> that result
    step_of: dict[Operation, int] = {}
    last: dict[SSAValue, int] = {}  # the step results, in step order
    for op in function.body.ops:
        if isinstance(op, VIEW_OPS):
            if op.operands[0] in source:
                source[op.results[0]] = source[op.operands[0]]
        elif isinstance(op, GraphOperation) and not isinstance(op, ConstantOp):
            step_of[op] = len(step_of)
            source.update((r, r) for r in op.results)
            last.update((r, step_of[op]) for r in op.results)
    # Function arguments, constants and views of them are not in `source`: they stay outside the arena.
    for op in function.body.ops:
        step = step_of.get(op, len(step_of) if isinstance(op, func.ReturnOp) else None)
        if step is None:
            continue
        for operand in op.operands:
            if operand in source:
                last[source[operand]] = max(last[source[operand]], step)
    ids = {value: i for i, value in enumerate(last)}
    buffers: list[Buffer] = []
    for value, i in ids.items():
        op = value.owner
        assert isinstance(op, Operation)
        reused = _inplace_candidate(op, value, step_of[op], source, last) if inplace else None
        offer = ids[reused] if reused is not None else None
        buffers.append(Buffer(i, buffer_bytes(value), step_of[op], last[value], offer))
    return buffers


def _inplace_candidate(
    op: Operation, result: SSAValue, step: int, source: dict[SSAValue, SSAValue], last: dict[SSAValue, int]
) -> SSAValue | None:
    """The first arena input of an elementwise op that has the result's type (no broadcast) and dies at this step."""
    if not isinstance(op, ELEMENTWISE_OPS):
        return None
    for operand in op.operands:
        root = source.get(operand)
        if root is not None and operand.type == result.type and last[root] == step:
            return root
    return None


def plan_seconds(buffers: list[Buffer]) -> float:
    start = time.perf_counter()
    plan(buffers)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description="The static memory planner on the onnx package's light networks.")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-inplace", action="store_true", help="offer no in-place reuse")
    args = parser.parse_args()
    print(f"{'model':<16}{'buffers':>8}{'in-place':>9}{'lower MB':>10}{'arena MB':>10}{'ratio':>7}{'plan ms':>9}")
    for path in light_models():
        name = path.stem.removeprefix("light_")
        buffers = model_buffers(gnomon.load(path), inplace=not args.no_inplace)
        result = plan(buffers)
        verify(buffers, result)
        milliseconds = statistics.median(plan_seconds(buffers) for _ in range(args.repeat)) * 1000
        print(
            f"{name:<16}{len(buffers):>8}{len(result.inplace):>9}{result.lower_bound / MB:>10.2f}"
            f"{result.arena_size / MB:>10.2f}{result.arena_size / result.lower_bound:>7.3f}{milliseconds:>9.1f}"
        )
    print()
    print("compiled programs (gnomon.compile): one step per kernel launch")
    print(f"{'model':<16}{'launches':>9}{'buffers':>8}{'in-place':>9}{'lower MB':>10}{'arena MB':>10}{'ratio':>7}")
    for path in light_models():
        function = rt_functions(gnomon.compile(path).module)[0]
        verify_plan(function)
        buffers, compiled = plan_of(function)
        bound, arena = (_integer(function.attributes[k]) for k in (rt.ARENA_LOWER_BOUND, rt.ARENA_SIZE))
        launches = sum(isinstance(op, rt.LaunchOp) for op in function.body.block.ops)
        print(
            f"{path.stem.removeprefix('light_'):<16}{launches:>9}{len(buffers):>8}{len(compiled.inplace):>9}"
            f"{bound / MB:>10.2f}{arena / MB:>10.2f}{arena / bound:>7.3f}"
        )


def _integer(attr: object) -> int:
    assert isinstance(attr, IntegerAttr)
    return attr.value.data


if __name__ == "__main__":
    main()
