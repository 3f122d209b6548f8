"""Dynamic shapes: one compilation for a range of sizes, against recompiling per size and padding to the maximum
(issue 19, acceptance 2).

Two workloads, over lengths 1..128 (`--lengths` changes them; the encoder's positions stop at 128):
- encoder: `gnomon.models.BertEncoder` (token and position embeddings, 2 post-norm layers, d_model 64, batch 2)
  at every sequence length;
- decode: a GPT-2-style decoder step (one new token against a KV cache of `past` positions, 2 layers, d_model 64,
  4 heads) at every cache length, as greedy decoding grows it.

For each, side by side in one run:
- gnomon dynamic: compiled once with the length a `torch.export.Dim`, run at every length;
- gnomon per shape: compiled for each length (static shapes), each program run at its length;
- gnomon padded: compiled once at the maximum length, inputs padded to it with a key padding mask (so that the real
  positions' results are exact), run at every length;
- PyTorch eager.
Compile times are wall seconds in this process with a fresh kernel cache (`GNOMON_CACHE_DIR`), summed over the
range (nothing here is tuned). Latency per length: the smallest of `--repeats` medians, the ways taking turns;
the table prints a sample of lengths and the geomeans over all of them, and what padding can cost at most: the padded
program's FLOPs and predicted time over each length's own program (gnomon's cost model, this machine's calibration).
Where the padded positions are a small part of the work (a decode step's weight products do not grow with the cache),
no compiler can gain more than that by not padding. Targets: dynamic compiles at least 5x faster
than per shape, runs within 1.1x of per shape (geomean), and at least 1.5x faster than padded.

    python bench/dynamic.py [--workloads encoder,decode] [--lengths 1-128] [--repeats 5]
    python bench/dynamic.py --workloads decode --lengths 8-1024:8   # GPT-2's context, every 8th cache length

Run it alone on the machine (never beside the tests or another benchmark).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.export import Dim

import gnomon
from gnomon.cost import Device, load_device, program_report
from gnomon.errors import GnomonError
from gnomon.models import BertEncoder

sys.path.insert(0, str(Path(__file__).parent))
from timing import timed


class PaddedBert(nn.Module):
    """`BertEncoder` on ids padded to its maximum length, the padding masked out of attention."""

    def __init__(self, model: BertEncoder):
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        h = self.model.norm(self.model.tokens(ids) + self.model.positions(positions))
        return self.model.layers(h, src_key_padding_mask=padding)


class DecoderStep(nn.Module):
    """One step of a GPT-2-style decoder: the new token's logits and each layer's keys and values with it appended.
    Caches are [batch, heads, past, head_dim], a key and a value per layer (two layers); `mask` (optional,
    [batch, past + 1], True where a cache position is padding) lets a padded cache run."""

    def __init__(self, vocab: int = 1000, d_model: int = 64, heads: int = 4, max_len: int = 129):
        super().__init__()
        layers = 2  # the caches are named arguments: two layers' keys and values
        torch.manual_seed(0)
        self.heads, self.head_dim, self.layers = heads, d_model // heads, layers
        self.tokens, self.positions = nn.Embedding(vocab, d_model), nn.Embedding(max_len, d_model)
        self.norms1 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(layers))
        self.norms2 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(layers))
        self.qkv = nn.ModuleList(nn.Linear(d_model, 3 * d_model) for _ in range(layers))
        self.out = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(layers))
        self.mlp = nn.ModuleList(
            nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
            for _ in range(layers)
        )
        self.final = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.eval()

    def forward(
        self,
        token: torch.Tensor,
        position: torch.Tensor,
        k0: torch.Tensor,
        v0: torch.Tensor,
        k1: torch.Tensor,
        v1: torch.Tensor,
        mask: torch.Tensor | None = None,
    ):
        caches = (k0, v0, k1, v1)
        batch = token.shape[0]
        h = self.tokens(token) + self.positions(position)  # [batch, 1, d]
        new_caches = []
        for layer in range(self.layers):
            q, k, v = self.qkv[layer](self.norms1[layer](h)).split(h.shape[-1], dim=-1)
            q, k, v = (t.view(batch, 1, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
            keys = torch.cat([caches[2 * layer], k], dim=2)
            values = torch.cat([caches[2 * layer + 1], v], dim=2)
            allowed = None if mask is None else ~mask[:, None, None, :]
            a = nn.functional.scaled_dot_product_attention(q, keys, values, attn_mask=allowed)
            h = h + self.out[layer](a.transpose(1, 2).reshape(batch, 1, -1))
            h = h + self.mlp[layer](self.norms2[layer](h))
            new_caches += [keys, values]
        return (self.head(self.final(h)), *new_caches)


def _fresh_cache() -> None:
    os.environ["GNOMON_CACHE_DIR"] = tempfile.mkdtemp(prefix="gnomon-bench-dynamic-")


def compile_timed(build: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    built = build()
    return built, time.perf_counter() - start


def geomean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def _device() -> Device:
    """The device the padding's predicted cost is priced on: this machine's calibration, else the generic CPU (read
    before the bench points the cache, where the calibration lives, at a fresh folder)."""
    try:
        return load_device("local")
    except GnomonError:
        return load_device("generic-cpu")


def padding_cost(
    padded: object, per_shape: dict[int, object], lengths: Sequence[int], device: Device
) -> tuple[float, float, str]:
    """What padding to the maximum can cost at most, from gnomon's cost model of the static programs: the geomean over
    lengths of the padded program's FLOPs, and of its predicted time, over the program compiled for that length.
    Skipping the padding cannot gain more than the work it skips."""
    top = program_report(padded.module, device)  # pyright: ignore[reportAttributeAccessIssue]
    reports = [program_report(per_shape[n].module, device) for n in lengths]  # pyright: ignore[reportAttributeAccessIssue]
    flops = geomean([top.total_flops / r.total_flops for r in reports])
    seconds = geomean([top.predicted_e2e_s / r.predicted_e2e_s for r in reports])
    return flops, seconds, device.name


def encoder(lengths: Sequence[int], repeats: int, device: Device) -> None:
    model = BertEncoder()
    top = max(lengths)
    ids = {n: model.example_inputs(seq=n)[0] for n in lengths}
    seq = Dim("seq", min=1, max=model.max_len)
    dynamic, dynamic_s = compile_timed(
        lambda: gnomon.compile(model, model.example_inputs(), dynamic_shapes=({1: seq},))
    )
    per_shape: dict[int, object] = {}
    per_shape_s = 0.0
    for n in lengths:
        per_shape[n], seconds = compile_timed(lambda n=n: gnomon.compile(model, (ids[n],)))
        per_shape_s += seconds
    padded_model = PaddedBert(model).eval()
    padding_example = torch.zeros(2, top, dtype=torch.bool)
    padded, padded_s = compile_timed(
        lambda: gnomon.compile(padded_model, (torch.zeros(2, top, dtype=torch.int64), padding_example))
    )

    def padded_inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
        full = np.zeros((2, top), np.int64)
        full[:, :n] = ids[n].numpy()
        mask = np.ones((2, top), bool)
        mask[:, :n] = False
        return full, mask

    rows = []
    for n in lengths:
        x = ids[n].numpy()
        padded_x = padded_inputs(n)
        with torch.no_grad():
            reference = model(ids[n]).numpy()
        np.testing.assert_allclose(dynamic(x)[0], reference, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(per_shape[n](x)[0], reference, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(padded(*padded_x)[0][:, :n], reference, rtol=1e-4, atol=1e-4)
        calls = 30
        with torch.no_grad():
            times = [
                timed(lambda: dynamic(x), repeats, calls),
                timed(lambda n=n: per_shape[n](x), repeats, calls),
                timed(lambda: padded(*padded_x), repeats, calls),
                timed(lambda n=n: model(ids[n]), repeats, calls),
            ]
        rows.append((n, times))
    bound = padding_cost(padded, per_shape, lengths, device)
    _report("encoder (BertEncoder, batch 2)", lengths, rows, dynamic_s, per_shape_s, padded_s, bound)


def decode(lengths: Sequence[int], repeats: int, device: Device) -> None:
    top = max(lengths)
    step = DecoderStep(max_len=top + 1)
    layers, heads, dh = step.layers, step.heads, step.head_dim

    def caches(past: int) -> list[torch.Tensor]:
        torch.manual_seed(past)
        return [torch.randn(1, heads, past, dh) for _ in range(2 * layers)]

    def example(past: int) -> tuple[torch.Tensor, ...]:
        return (torch.tensor([[7]]), torch.tensor([[past]]), *caches(past))

    past = Dim("past", min=1, max=top)
    dynamic_shapes = ({}, {}, *({2: past} for _ in range(2 * layers)))
    dynamic, dynamic_s = compile_timed(lambda: gnomon.compile(step, example(top), dynamic_shapes=dynamic_shapes))
    per_shape: dict[int, object] = {}
    per_shape_s = 0.0
    for n in lengths:
        per_shape[n], seconds = compile_timed(lambda n=n: gnomon.compile(step, example(n)))
        per_shape_s += seconds
    mask_example = torch.zeros(1, top + 1, dtype=torch.bool)
    padded, padded_s = compile_timed(lambda: gnomon.compile(step, (*example(top), mask_example)))

    def padded_inputs(n: int) -> list[np.ndarray]:
        token, position, *cache = (t.numpy() for t in example(n))
        full = []
        for c in cache:
            grown = np.zeros((1, heads, top, dh), np.float32)
            grown[:, :, :n] = c
            full.append(grown)
        mask = np.ones((1, top + 1), bool)
        mask[:, :n] = False
        mask[:, top] = False  # the new token's own position, appended after the padded cache
        return [token, position, *full, mask]

    rows = []
    for n in lengths:
        x = [t.numpy() for t in example(n)]
        padded_x = padded_inputs(n)
        with torch.no_grad():
            reference = step(*example(n))[0].numpy()
        np.testing.assert_allclose(dynamic(*x)[0], reference, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(per_shape[n](*x)[0], reference, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(padded(*padded_x)[0], reference, rtol=1e-4, atol=1e-4)
        calls = 50
        with torch.no_grad():
            torch_x = example(n)
            times = [
                timed(lambda: dynamic(*x), repeats, calls),
                timed(lambda n=n: per_shape[n](*x), repeats, calls),
                timed(lambda: padded(*padded_x), repeats, calls),
                timed(lambda: step(*torch_x), repeats, calls),
            ]
        rows.append((n, times))
    bound = padding_cost(padded, per_shape, lengths, device)
    title = "decode (GPT-2-style step, KV cache of `past` positions)"
    _report(title, lengths, rows, dynamic_s, per_shape_s, padded_s, bound)


def _report(
    title: str,
    lengths: Sequence[int],
    rows: Sequence[tuple[int, Sequence[tuple[float, float]]]],
    dynamic_s: float,
    per_shape_s: float,
    padded_s: float,
    padding: tuple[float, float, str],
) -> None:
    print(f"\n{title}: lengths {min(lengths)}..{max(lengths)} ({len(lengths)} lengths)")
    print(
        f"  compile: dynamic {dynamic_s:.1f} s (once), per shape {per_shape_s:.1f} s ({len(lengths)} compilations),"
        f" padded {padded_s:.1f} s (once): per shape / dynamic = {per_shape_s / dynamic_s:.1f}x"
    )
    print(f"  {'length':>6} {'dynamic ms':>14} {'per shape ms':>14} {'padded ms':>14} {'eager ms':>14}")
    sample = {lengths[0], lengths[-1], *lengths[:: max(1, len(lengths) // 8)]}
    for n, times in rows:
        if n in sample:
            cells = " ".join(f"{t * 1e3:8.3f} ±{s * 1e3:4.2f}" for t, s in times)
            print(f"  {n:>6} {cells}")
    ratio = geomean([t[0][0] / t[1][0] for _, t in rows])
    padded_ratio = geomean([t[2][0] / t[0][0] for _, t in rows])
    eager_ratio = geomean([t[0][0] / t[3][0] for _, t in rows])
    print(
        f"  geomean over all lengths: dynamic / per shape {ratio:.3f}x (target <= 1.1), padded / dynamic"
        f" {padded_ratio:.2f}x (target >= 1.5), dynamic / eager {eager_ratio:.2f}x"
    )
    flops, seconds, device = padding
    print(
        f"  what padding can cost at most (geomean, padded over the program for each length): {flops:.2f}x the FLOPs,"
        f" {seconds:.2f}x the predicted time ({device})"
    )


def parse_lengths(text: str) -> list[int]:
    """`1-128` (every length), `8-1024:8` (every 8th)."""
    span, _, step = text.partition(":")
    low, _, high = span.partition("-")
    return list(range(int(low), int(high or low) + 1, int(step or 1)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="encoder,decode")
    parser.add_argument("--lengths", default="1-128", type=parse_lengths)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(2)
    device = _device()
    _fresh_cache()
    for workload in args.workloads.split(","):
        {"encoder": encoder, "decode": decode}[workload](args.lengths, args.repeats, device)


if __name__ == "__main__":
    main()
