"""`graph.embedding_bag_adam_update` against torch.optim.SparseAdam on an `nn.EmbeddingBag(sparse=True)`: the
reference's step and the runtime's, bound in place as a training step runs it, give torch's table and moments."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from conftest import relative_l2
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from gnomon.context import gnomon_context
from gnomon.dialects.graph.grad import EmbeddingBagAdamUpdateOp
from gnomon.reference import run_reference
from gnomon.runtime.library import TORCH_IMPLS

ROWS, DIM, BAGS = 12, 4, 4
LR, BETA1, BETA2, EPS = 0.05, 0.8, 0.95, 1e-6
INDICES = [3, 1, 3, 7, 7, 7, 0, 3, 11]
"""Row 3 looked up twice in a bag and again in another, row 7 three times in one bag; rows 2, 4-6, 8-10 never."""
OFFSETS = [0, 3, 3, 6]
"""Bag 1 is empty."""


def _module(mode: str, weighted: bool) -> ModuleOp:
    table = f"tensor<{ROWS}x{DIM}xf32>"
    operands = [table] * 3 + [f"tensor<{BAGS}x{DIM}xf32>", f"tensor<{len(INDICES)}xi64>",
                              f"tensor<{len(OFFSETS)}xi64>", "tensor<f32>"]  # fmt: skip
    if weighted:
        operands.append(f"tensor<{len(INDICES)}xf32>")
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(operands))
    names = ", ".join(f"%a{i}" for i in range(len(operands)))
    attrs = f'{{mode = "{mode}", beta1 = {BETA1} : f64, beta2 = {BETA2} : f64, eps = {EPS:e} : f64}}'
    results = f"{table}, {table}, {table}"
    module = Parser(gnomon_context(), f"""
    func.func @main({args}) -> ({results}) {{
      %t, %m, %v = graph.embedding_bag_adam_update {names} {attrs} : ({", ".join(operands)}) -> ({results})
      func.return %t, %m, %v : {results}
    }}""").parse_module()  # fmt: skip
    module.verify()
    return module


@pytest.mark.parametrize(("mode", "weighted"), [("sum", False), ("mean", False), ("sum", True)])
def test_embedding_bag_adam_update_steps_as_torch_sparse_adam(mode: str, weighted: bool) -> None:
    torch.manual_seed(0)
    bag = torch.nn.EmbeddingBag(ROWS, DIM, mode=mode, sparse=True)
    optimizer = torch.optim.SparseAdam(bag.parameters(), lr=LR, betas=(BETA1, BETA2), eps=EPS)
    module = _module(mode, weighted)
    op = next(op for op in module.walk() if isinstance(op, EmbeddingBagAdamUpdateOp))
    indices, offsets = torch.tensor(INDICES), torch.tensor(OFFSETS)
    weights = [torch.rand(len(INDICES)) + 0.5] if weighted else []
    zeros = np.zeros((ROWS, DIM), np.float32)
    reference = [bag.weight.detach().numpy().copy(), zeros, zeros]
    # The runtime's state, each result the same memory as its input: the step updates it in place.
    runtime = [torch.from_numpy(x.copy()) for x in reference]
    for step in (1, 2):
        dy = torch.randn(BAGS, DIM)
        optimizer.zero_grad()
        (bag(indices, offsets, per_sample_weights=weights[0] if weights else None) * dy).sum().backward()
        optimizer.step()
        step_size = torch.tensor(LR * math.sqrt(1 - BETA2**step) / (1 - BETA1**step), dtype=torch.float32)
        rest = [dy, indices, offsets, step_size, *weights]
        reference = run_reference(module, [*reference, *(x.numpy() for x in rest)])
        with torch.inference_mode():
            TORCH_IMPLS[type(op)](op).bind([*runtime, *rest], runtime)()
        state = optimizer.state[bag.weight]
        expected = [bag.weight.detach().numpy(), state["exp_avg"].numpy(), state["exp_avg_sq"].numpy()]
        for from_reference, in_place, torch_value in zip(reference, runtime, expected, strict=True):
            assert relative_l2(from_reference, torch_value) <= 1e-5
            assert relative_l2(in_place.numpy(), torch_value) <= 1e-5
        untouched = [row for row in range(ROWS) if row not in INDICES]
        np.testing.assert_array_equal(reference[1][untouched], 0)  # lazy: rows not looked up keep their moments
