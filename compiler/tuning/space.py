"""The schedules `gnomon tune` considers for one generated kernel, by what the kernel's code generator reads.

- A convolution (`kernel_to_linalg.conv`): `tile = [vectors, positions]`, the channel block in vectors and the
  producer's micro-tile in columns, within the vector registers (`conv_rows.register_tile`); the machine's vector
  width, and half of it; 1 to all threads.
- A matmul (`kernel_to_linalg.matmul`): `tile = [rows, columns]`, the micro-tile, within the registers; threads.
- Any other kernel (elementwise nests, reductions, softmax): its threads, and where its schedule tiles loops (a
  transpose's blocks), tiles of 16, 32 and 64.

The first candidate is always the kernel's own (default) schedule.
"""

from __future__ import annotations

from collections.abc import Iterator

from gnomon.cost.devices import Device
from gnomon.cost.threads import generated_threads
from gnomon.dialects import kernel
from gnomon.dialects.graph.base import ints
from gnomon.dialects.graph.linalg import MatmulOp
from gnomon.dialects.graph.nn import ConvOp
from gnomon.dialects.kernel import ScheduleAttr

__all__ = ["candidates", "registers"]

CONV_POSITIONS = (2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28)
MATMUL_ROWS = (2, 4, 6, 8, 12, 14)
TILES = (16, 32, 64)


def registers(width: int) -> int:
    """Vector registers of a machine whose widest vectors hold `width` f32 lanes: AVX-512's 32, else AVX2's 16."""
    return 32 if width >= 16 else 16


def _threads(cores: int) -> range:
    return range(1, cores + 1)


def _conv(cores: int, lanes: int) -> Iterator[ScheduleAttr]:
    for width in sorted({lanes, max(lanes // 2, 8)}, reverse=True):
        for vectors in (1, 2):
            if vectors * width < 16 or vectors * width % 8:
                continue
            for positions in CONV_POSITIONS:
                if vectors * (positions + 1) + 1 > registers(width):
                    continue
                for threads in _threads(cores):
                    yield ScheduleAttr.get([vectors, positions], width, [0, 1], threads)


def _matmul(schedule: ScheduleAttr, cores: int, lanes: int) -> Iterator[ScheduleAttr]:
    width = schedule.vector.data
    for rows in MATMUL_ROWS:
        for vectors in (1, 2, 3, 4):
            # accumulators, the B vectors and one broadcast of A
            if rows * vectors + vectors + 1 > registers(width):
                continue
            for threads in _threads(cores):
                yield ScheduleAttr.get([rows, vectors * width], width, [0, 1], threads)


def _nest(schedule: ScheduleAttr, cores: int) -> Iterator[ScheduleAttr]:
    tile, order = ints(schedule.tile), ints(schedule.order)
    tiled = [d for d, t in enumerate(tile) if t]
    sizes = [None] if not tiled else TILES
    for size in sizes:
        new_tile = [size if d in tiled and size else t for d, t in enumerate(tile)]
        for threads in _threads(cores):
            yield ScheduleAttr.get(new_tile, schedule.vector.data, order, threads)


def candidates(kernel_func: kernel.FuncOp, device: Device, lanes: int) -> list[ScheduleAttr]:
    """The schedules to consider for a generated kernel on `device` (a CPU: its cores), its own first; `lanes`: the
    machine's widest f32 vector. Schedules that differ only in threads the runtime would not use (too little work
    to split, `generated_threads`) are one candidate."""
    schedule = kernel_func.schedule
    assert schedule is not None
    assert kernel_func.is_generated
    first = next(iter(kernel_func.body.block.ops), None)
    if isinstance(first, ConvOp):
        space = _conv(device.cores, lanes)
    elif isinstance(first, MatmulOp):
        space = _matmul(schedule, device.cores, lanes)
    else:
        space = _nest(schedule, device.cores)

    def effective(candidate: ScheduleAttr) -> tuple[object, ...]:
        trial = kernel_func.clone()  # with its body: a convolution's or matmul's threads follow its work
        trial.schedule = candidate
        threads = generated_threads(trial, device)
        return (candidate.tile, candidate.vector, candidate.order, threads)

    found = [schedule]
    seen = {effective(schedule)}
    for candidate in space:
        key = effective(candidate)
        if key not in seen:
            seen.add(key)
            found.append(candidate)
    return found
