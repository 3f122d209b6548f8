"""The native backend with `?` dims: one compilation runs a model at every size in its declared range.

Generated kernels read their sizes from the memref descriptors (one compiled kernel serves every size), the memory
plan is made at the bounds, and the runtime binds each new shape once: input arrays, views of the arena at the
planned offsets, and every launch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.export import Dim
from xdsl.dialects import func
from xdsl.parser import Parser

import gnomon
from gnomon.context import gnomon_context
from gnomon.dialects import kernel
from gnomon.dialects.graph.base import DIM_BOUNDS_ATTR, DIM_LOWER_BOUNDS_ATTR
from gnomon.executable import Executable, InputError, executable_from_graph, load_compiled
from gnomon.models import MLP
from gnomon.passes.kernel_to_rt import LoweringError
from gnomon.pipeline import load
from gnomon.reference import run_reference
from gnomon.runtime import executor
from gnomon.runtime.codegen import compile_kernel
from gnomon.runtime.executor import ProgramError


@pytest.fixture(scope="module", autouse=True)
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every kernel of this module compiles into a fresh cache directory, so compile counts mean compilations."""
    directory = tmp_path_factory.mktemp("kernels")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GNOMON_CACHE_DIR", str(directory))
        yield directory


class TinyAttn(torch.nn.Module):
    """A transformer block: layer norm, fused qkv, causal attention, and an MLP with a generated tail."""

    def __init__(self, d: int = 32, heads: int = 4):
        super().__init__()
        torch.manual_seed(0)
        self.h = heads
        self.qkv, self.o = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.n1, self.n2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.n1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, d))
        return x + torch.sigmoid(self.mlp(self.n2(x))) * x


def compile_dynamic(model: torch.nn.Module, example: torch.Tensor, axis: int, symbol: str, low: int, high: int):
    dims = ({axis: Dim(symbol, min=low, max=high)},)
    return gnomon.compile(model, (example,), dynamic_shapes=dims, dim_ranges={symbol: (low, high)})


def check_sizes(
    model: torch.nn.Module, dynamic: Executable, make: Callable[[int], torch.Tensor], sizes: tuple[int, ...]
) -> None:
    """At each size: the numbers of eager PyTorch, and exactly those of a static compile at that size."""
    for size in sizes:
        x = make(size)
        (got,) = dynamic(x)
        with torch.no_grad():
            want = model(x).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"size {size}")
        static = gnomon.compile(model, (x,))
        np.testing.assert_array_equal(got, static(x)[0], err_msg=f"size {size}")
        program = static.program
        assert program is not None
        assert program.profile.shapes_bound == 1  # a static program binds once, at load


def test_mlp_with_a_dynamic_batch_compiles_once_and_runs_at_every_size_in_its_range() -> None:
    model = MLP().eval()
    exe = compile_dynamic(model, torch.randn(5, 64), 0, "batch", 1, 64)
    program = exe.program
    assert program is not None
    assert program.profile.shapes_bound == 1  # at load, at the bound
    check_sizes(model, exe, lambda n: torch.randn(n, 64), (1, 7, 64))
    assert program.profile.shapes_bound == 3  # 64 was bound at load
    exe(torch.randn(7, 64))
    assert program.profile.shapes_bound == 3  # a cached shape


def test_attention_with_a_dynamic_sequence_compiles_each_kernel_once() -> None:
    model = TinyAttn()
    exe = compile_dynamic(model, torch.randn(2, 5, 32), 1, "seq", 2, 128)
    program = exe.program
    assert program is not None
    generated = [op for op in exe.module.ops if isinstance(op, kernel.FuncOp) and op.is_generated]
    assert len(generated) >= 3  # transposes, the residual add, the sigmoid-mul-add tail: all with `?` dims
    assert all(any(not t.has_static_shape() for t in op.function_type.inputs.data) for op in generated)
    loaded = program.profile.kernels_generated, program.profile.kernels_compiled
    check_sizes(model, exe, lambda n: torch.randn(2, n, 32), (2, 7, 128))
    assert (program.profile.kernels_generated, program.profile.kernels_compiled) == loaded
    static = gnomon.compile(model, (torch.randn(2, 128, 32),)).program
    assert static is not None
    assert program.profile.arena_bytes == static.profile.arena_bytes  # planned at the bound


def test_a_dynamic_program_saves_and_loads(tmp_path: Path) -> None:
    model = TinyAttn()
    exe = compile_dynamic(model, torch.randn(2, 5, 32), 1, "seq", 2, 128)
    exe.save(tmp_path / "attn.mlir")
    loaded = load_compiled(tmp_path / "attn.mlir")
    x = torch.randn(2, 9, 32)
    np.testing.assert_array_equal(loaded(x)[0], exe(x)[0])


def test_an_input_outside_its_range_is_one_line_naming_it() -> None:
    exe = compile_dynamic(TinyAttn(), torch.randn(2, 5, 32), 1, "seq", 2, 128)
    program = exe.program
    assert program is not None
    for size in (1, 129):
        x = torch.randn(2, size, 32)
        with pytest.raises(
            InputError, match=rf"^input 'x': dim 1 \(seq\) is {size}, outside its declared range 2..128$"
        ):
            exe(x)
        with pytest.raises(ProgramError, match=rf"^input 0: dim 1 \(seq\) is {size}, outside its range 2..128$"):
            program.run([x.numpy()])


def test_a_dynamic_dim_without_a_bound_is_a_lowering_error() -> None:
    module = load(MLP().eval(), (torch.randn(5, 64),), dynamic_shapes=({0: Dim("batch", max=64)},))
    for attr in (DIM_BOUNDS_ATTR, DIM_LOWER_BOUNDS_ATTR):
        module.attributes.pop(attr, None)
    with pytest.raises(LoweringError, match=r"^@main: dim 0 \(batch\) of input 0 \(.*\) has no upper bound; [^\n]*$"):
        executable_from_graph(module, "MLP")


def test_bindings_are_cached_per_shape_up_to_a_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "BINDINGS", 2)
    exe = compile_dynamic(MLP().eval(), torch.randn(5, 64), 0, "batch", 1, 64)
    program = exe.program
    assert program is not None
    for size in (3, 4, 3, 5, 3):  # 3 stays recent; 4 leaves the cache when 5 comes
        exe(torch.randn(size, 64))
    assert program.profile.shapes_bound == 4  # the bound at load, 3, 4, 5
    exe(torch.randn(4, 64))
    assert program.profile.shapes_bound == 5


T, R = "tensor<?x12x?xf32>", "tensor<?x12x1xf32>"
KERNELS = {
    "broadcast add, gelu": (
        [T, "tensor<?x1x?xf32>"],
        [f"%s = graph.add %a0, %a1 : ({T}, tensor<?x1x?xf32>) -> {T}", f"%r = graph.gelu %s : ({T}) -> {T}"],
        [0, 0, 0], lambda n: [(n, 12, n), (n, 1, n)],
    ),
    "tiled transpose": (
        [T], [f"%r = graph.transpose %a0 {{permutation = array<i64: 2, 1, 0>}} : ({T}) -> {T}"],
        [0, 32, 32], lambda n: [(n, 12, n)],
    ),
    "mean over a dynamic axis": (
        [T],
        [f"%m = graph.reduce_mean %a0 {{axes = array<i64: 2>, keepdims = true}} : ({T}) -> {R}",
         f"%r = graph.sub %a0, %m : ({T}, {R}) -> {T}"],
        [0, 0, 0], lambda n: [(n, 12, n)],
    ),
    "softmax over a dynamic axis": (
        [T], [f"%r = graph.softmax %a0 {{axis = -1 : i64}} : ({T}) -> {T}"], [0, 0, 0], lambda n: [(n, 12, n)],
    ),
}  # fmt: skip
"""Generated kernels with `?` dims, each returning %r of type T: argument types, body, tiles, and the arguments'
shapes at size n."""


@pytest.mark.parametrize("case", list(KERNELS))
def test_a_kernel_with_dynamic_dims_compiles_once_for_every_size(case: str) -> None:
    args, body, tile, shapes = KERNELS[case]
    params = ", ".join(f"%a{i}: {t}" for i, t in enumerate(args))
    text = f"func.func @f({params}) -> {T} {{\n" + "\n".join(body) + f"\nfunc.return %r : {T}\n}}"
    module = Parser(gnomon_context(), text).parse_module()
    function = next(iter(module.ops))
    assert isinstance(function, func.FuncOp)
    body = function.body.clone()
    terminator = body.block.last_op
    assert terminator is not None
    body.block.insert_op_before(kernel.YieldOp(*terminator.operands), terminator)
    body.block.erase_op(terminator)
    schedule = kernel.ScheduleAttr.get(tile, 8, [0, 1, 2], 4)
    compiled = compile_kernel(kernel.FuncOp("f", function.function_type, body, schedule=schedule))
    rng = np.random.default_rng(0)
    for n in (1, 7, 64):
        inputs = [rng.standard_normal(shape).astype(np.float32) for shape in shapes(n)]
        (want,) = run_reference(module, inputs)
        for threads in (1, 3):
            got = np.empty(want.shape, want.dtype)
            compiled.bind(inputs, [got], threads)()
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, err_msg=f"{case} at n = {n}, {threads} threads")
