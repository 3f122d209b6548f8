"""A model's embedding tables as a sharding plan sees them: their shapes, and the ids one batch looks up.

The index distribution is kept as the example batch's ids. How many distinct rows a larger batch touches (all
ranks' ids meet at a table-wise shard) is extrapolated from them with an occupancy model: the ids behave as draws
from `R` equally likely rows, where `R` is what gives the sample's distinct count (`d = R (1 - exp(-k / R))` for `k`
draws). Uniform ids give `R` = the table's rows; hot rows (a power law) give a smaller `R`, so repeats grow with the
batch as they do in click logs. A row block (row-wise sharding) is treated the same way with its own ids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

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
    """Distinct rows among `lookups` draws like `sample`'s from `rows` rows (the occupancy model above)."""
    if lookups <= 0 or rows <= 0:
        return 0
    if len(sample) == 0:
        effective = float(rows)  # no sample: assume uniform ids
    else:
        effective = _effective_rows(len(sample), len(np.unique(sample)), rows)
    return max(1, min(rows, math.ceil(lookups), round(effective * -math.expm1(-lookups / effective))))


def _effective_rows(draws: int, distinct: int, rows: int) -> float:
    """The `R` <= rows for which `draws` uniform draws from `R` rows touch `distinct` of them on average."""
    if distinct >= draws or rows * -math.expm1(-draws / rows) <= distinct:
        return float(rows)  # no repeat beyond what uniform ids over the whole table give
    low, high = float(distinct), float(rows)
    for _ in range(60):  # bisection on log R: the expected count rises with R
        middle = math.sqrt(low * high)
        if middle * -math.expm1(-draws / middle) < distinct:
            low = middle
        else:
            high = middle
    return math.sqrt(low * high)
