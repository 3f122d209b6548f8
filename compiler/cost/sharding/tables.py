"""A model's embedding tables as a sharding plan sees them: their shapes, and the ids one batch looks up.

The index distribution is kept as the example batch's ids. How many distinct rows a larger batch touches (all
ranks' ids meet at a table-wise shard) is extrapolated from them: the ids behave as draws from a power law over the
table's rows (the r-th hottest row's weight 1 / r ** s, Zipf's law, as click logs' ids roughly follow), with the
exponent `s` that gives the sample's distinct count; uniform ids give s = 0, the occupancy of the whole table. An
earlier model, draws from `R` equally likely rows (R fitted the same way), saturated too soon on hot ids: from one
rank's 4096 power-law ids (exponent 1.05) into 20k-500k rows it put two ranks' 8192 at 1.1-1.2x the sample's
distinct rows, where they touched 1.7-1.8x. A row block (row-wise sharding) is treated the same way with its own ids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

import numpy as np

__all__ = ["EmbeddingTable", "distinct_rows", "synthetic_ids"]


@dataclass(frozen=True)
class EmbeddingTable:
    """One embedding bag's table and the ids one rank's example batch looks up in it."""

    name: str
    """The table's parameter name in the model (`embeddings.0.weight`)."""
    rows: int
    dim: int
    element_bytes: int
    batch: int
    """Bags (samples) in one rank's example batch."""
    ids: np.ndarray = field(repr=False, compare=False, hash=False)
    """The example batch's ids, int64."""
    mode: str = "sum"

    @property
    def bytes(self) -> int:
        return self.rows * self.dim * self.element_bytes

    @property
    def pooling(self) -> float:
        """Ids per bag."""
        return len(self.ids) / self.batch if self.batch else 0.0

    @property
    def distinct_fraction(self) -> float:
        """Distinct rows over ids in the example batch (1: no id repeats)."""
        return len(np.unique(self.ids)) / len(self.ids) if len(self.ids) else 1.0

    def block_ids(self, first: int, rows: int) -> np.ndarray:
        return self.ids[(self.ids >= first) & (self.ids < first + rows)]

    def distinct(self, lookups: float, first: int = 0, rows: int | None = None) -> int:
        """Distinct rows that `lookups` ids drawn as the example's touch, within rows [first, first + rows) (the
        whole table by default); `lookups` counts only ids that fall there."""
        rows = self.rows if rows is None else rows
        sample = self.ids if first == 0 and rows == self.rows else self.block_ids(first, rows)
        return distinct_rows(sample, lookups, rows)


def synthetic_ids(rows: int, count: int, zipf: float = 0.0, seed: int = 0) -> np.ndarray:
    """`count` ids uniform over `rows`, or with `zipf` > 0 from a power law (row r's weight 1 / (r + 1) ** zipf,
    the rows shuffled): for a model file, whose example ids are random numbers, not a click log's."""
    generator = np.random.default_rng(seed)
    if zipf <= 0:
        return generator.integers(0, rows, count, dtype=np.int64)
    weights = np.arange(1, rows + 1, dtype=np.float64) ** -zipf
    ranks = generator.choice(rows, size=count, p=weights / weights.sum())
    return generator.permutation(rows)[ranks].astype(np.int64)


def distinct_rows(sample: np.ndarray, lookups: float, rows: int) -> int:
    """Distinct rows among `lookups` draws like `sample`'s from `rows` rows (the power law above)."""
    if lookups <= 0 or rows <= 0:
        return 0
    exponent = 0.0 if len(sample) == 0 else _exponent(len(sample), len(np.unique(sample)), rows)  # none: uniform
    return max(1, min(rows, math.ceil(lookups), round(_expected_distinct(lookups, exponent, rows))))


_EXACT_RANKS = 1024
"""Rows priced one by one, hottest first; beyond them, in buckets of ranks 2% apart (their weights within 2^s %)."""


@cache
def _rank_buckets(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(a representative rank, how many rows) per bucket of the ranks 1..rows."""
    bounds = list(range(1, min(rows, _EXACT_RANKS) + 2))  # bucket i: ranks bounds[i] to bounds[i + 1] - 1
    while bounds[-1] <= rows:
        bounds.append(min(max(bounds[-1] + 1, math.floor(bounds[-1] * 1.02)), rows + 1))
    edges = np.array(bounds, dtype=np.float64)
    return np.sqrt(edges[:-1] * (edges[1:] - 1)), np.diff(edges)


def _expected_distinct(draws: float, exponent: float, rows: int) -> float:
    """Expected distinct rows among `draws` from the power law of `exponent` over `rows` rows."""
    ranks, counts = _rank_buckets(rows)
    weights = ranks**-exponent
    weights /= float(np.dot(weights, counts))
    return float(np.dot(counts, -np.expm1(-draws * weights)))


@cache
def _exponent(draws: int, distinct: int, rows: int) -> float:
    """The power law's exponent >= 0 for which `draws` draws touch `distinct` rows on average."""
    if distinct >= min(draws, rows) or _expected_distinct(draws, 0.0, rows) <= distinct:
        return 0.0  # no repeat beyond what uniform ids over the whole table give
    low, high = 0.0, 8.0
    for _ in range(40):  # bisection: the expected count falls as the exponent rises
        middle = (low + high) / 2
        if _expected_distinct(draws, middle, rows) > distinct:
            low = middle
        else:
            high = middle
    return (low + high) / 2
