"""The static memory planner: known optimal arenas, random schedules checked by `verify`, and real networks."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from conftest import LIGHT_NETWORKS, ModelCache, load_script
from hypothesis import given, settings
from hypothesis import strategies as st

from gnomon.errors import GnomonError
from gnomon.passes.kernel_to_rt.memory_plan import Buffer, MemoryPlan, MemoryPlanError, plan, verify

S = 1024
"""A buffer size that is a multiple of the default alignment, so optimal arenas are whole slots."""


def check(buffers: list[Buffer], result: MemoryPlan) -> None:
    """Everything a plan promises, checked against definitions computed here independently."""
    verify(buffers, result)
    by_id = {b.id: b for b in buffers}
    assert set(result.offsets) == set(by_id)
    assert result.arena_size == max((result.offsets[b.id] + b.size for b in buffers), default=0)
    assert result.arena_size >= result.lower_bound
    assert len(set(result.inplace.values())) == len(result.inplace), "an input was reused in place twice"
    for reuser, reused in result.inplace.items():
        b, source = by_id[reuser], by_id[reused]
        assert b.inplace_of == source.id
        assert source.last == b.first
        assert source.size >= b.size
    for b in buffers:
        if b.inplace_of is None or b.id in result.inplace:
            continue
        source = by_id[b.inplace_of]
        legal = source.last == b.first and source.size >= b.size
        assert not legal or source.id in result.inplace.values() or reaches(result.inplace, source.id, b.id)
    assert result.lower_bound == live_peak(buffers, result.inplace)


def reaches(inplace: dict[int, int], start: int, target: int) -> bool:
    """Whether following in-place reuses from `start` leads to `target` (taking it would close a cycle)."""
    seen: set[int] = set()
    while start not in seen:
        if start == target:
            return True
        seen.add(start)
        if start not in inplace:
            return False
        start = inplace[start]
    return False


def live_peak(buffers: list[Buffer], inplace: dict[int, int]) -> int:
    """The most bytes live at one step, step by step; an in-place chain is one block of its largest member's size
    from its first member's first step to its last member's last."""
    chains: dict[int, list[Buffer]] = {}
    for b in buffers:
        root = b.id
        while root in inplace:
            root = inplace[root]
        chains.setdefault(root, []).append(b)
    blocks = [(max(m.size for m in c), min(m.first for m in c), max(m.last for m in c)) for c in chains.values()]
    steps = range(max((last for _, _, last in blocks), default=-1) + 1)
    return max((sum(size for size, first, last in blocks if first <= step <= last) for step in steps), default=0)


def chain_of_three(inplace: bool) -> list[Buffer]:
    """a -> b -> c: each step reads the previous buffer and writes the next; c is the output."""
    return [
        Buffer(0, S, 0, 1),
        Buffer(1, S, 1, 2, inplace_of=0 if inplace else None),
        Buffer(2, S, 2, 3, inplace_of=1 if inplace else None),
    ]


def test_chain_needs_two_slots() -> None:
    result = plan(chain_of_three(inplace=False))
    check(chain_of_three(inplace=False), result)
    assert (result.arena_size, result.lower_bound, result.inplace) == (2 * S, 2 * S, {})


def test_chain_in_place_needs_one_slot() -> None:
    result = plan(chain_of_three(inplace=True))
    check(chain_of_three(inplace=True), result)
    assert (result.arena_size, result.lower_bound, result.inplace) == (S, S, {1: 0, 2: 1})
    assert set(result.offsets.values()) == {0}


def diamond(inplace: bool) -> list[Buffer]:
    """a feeds b and c, which meet in d: a = f(x); b = g(a); c = h(a); d = b + c."""
    return [
        Buffer(0, S, 0, 2),
        Buffer(1, S, 1, 3),
        Buffer(2, S, 2, 3, inplace_of=0 if inplace else None),
        Buffer(3, S, 3, 4, inplace_of=1 if inplace else None),
    ]


def test_diamond() -> None:
    result = plan(diamond(inplace=False))
    check(diamond(inplace=False), result)
    assert (result.arena_size, result.lower_bound) == (3 * S, 3 * S)  # a, b and c are all live at step 2


def test_diamond_in_place() -> None:
    result = plan(diamond(inplace=True))
    check(diamond(inplace=True), result)
    assert result.inplace == {2: 0, 3: 1}
    assert (result.arena_size, result.lower_bound) == (2 * S, 2 * S)


def residual_block(inplace: bool) -> list[Buffer]:
    """x -> conv (half the channels) -> conv -> add with x: the skip keeps x live across the block."""
    return [
        Buffer(0, S, 0, 3),
        Buffer(1, S // 2, 1, 2),
        Buffer(2, S, 2, 3),
        Buffer(3, S, 3, 4, inplace_of=2 if inplace else None),
    ]


def test_residual_block() -> None:
    result = plan(residual_block(inplace=False))
    check(residual_block(inplace=False), result)
    assert (result.arena_size, result.lower_bound) == (3 * S, 3 * S)  # x, y2 and the sum at the add


def test_residual_block_in_place() -> None:
    result = plan(residual_block(inplace=True))
    check(residual_block(inplace=True), result)
    assert result.inplace == {3: 2}
    assert (result.arena_size, result.lower_bound) == (S * 5 // 2, S * 5 // 2)  # x, y1 and y2 at the second conv


def test_disjoint_lifetimes_share_one_slot() -> None:
    buffers = [Buffer(i, (i + 1) * 100, 2 * i, 2 * i + 1) for i in range(5)]
    result = plan(buffers)
    check(buffers, result)
    assert result.arena_size == 500
    assert set(result.offsets.values()) == {0}


def test_refinement_reaches_the_bound_where_greedy_alone_does_not() -> None:
    # Greedy placement from each of the four orderings alone needs 12 units here; the optimum is the bound, 10.
    unit = 64
    buffers = [
        Buffer(0, 7 * unit, 7, 7),
        Buffer(1, 6 * unit, 3, 3),
        Buffer(2, 3 * unit, 5, 7),
        Buffer(3, 3 * unit, 2, 5),
    ]
    result = plan(buffers)
    check(buffers, result)
    assert (result.arena_size, result.lower_bound) == (10 * unit, 10 * unit)


def test_offsets_are_aligned() -> None:
    buffers = [Buffer(0, 10, 0, 1), Buffer(1, 10, 0, 1), Buffer(2, 10, 1, 2)]
    result = plan(buffers, alignment=64)
    check(buffers, result)
    assert sorted(result.offsets.values()) == [0, 64, 128]  # all three are live at step 1
    assert (result.arena_size, result.lower_bound) == (138, 30)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (Buffer(0, S, 0, 2), "the input lives past the step"),
        (Buffer(0, S // 2, 0, 1), "the input is smaller"),
    ],
)
def test_illegal_in_place_is_not_taken(source: Buffer, reason: str) -> None:
    buffers = [source, Buffer(1, S, 1, 3, inplace_of=0)]
    result = plan(buffers)
    check(buffers, result)
    assert result.inplace == {}, reason
    assert result.offsets[0] != result.offsets[1]


def test_an_input_is_reused_in_place_once() -> None:
    buffers = [Buffer(0, S, 0, 1), Buffer(1, S, 1, 2, inplace_of=0), Buffer(2, S, 1, 2, inplace_of=0)]
    result = plan(buffers)
    check(buffers, result)
    assert result.inplace == {1: 0}
    assert result.arena_size == 2 * S


def test_empty_schedule() -> None:
    assert plan([]) == MemoryPlan(offsets={}, arena_size=0, inplace={}, lower_bound=0, alignment=64)


@pytest.mark.parametrize(
    ("buffers", "message"),
    [
        ([Buffer(0, S, 0, 1), Buffer(0, S, 1, 2)], "memory plan: buffer id 0 appears twice"),
        (
            [Buffer(3, S, 2, 1)],
            "memory plan: buffer 3 has size 1024 and steps 2..1; it needs a size >= 0 and 0 <= first <= last",
        ),
        (
            [Buffer(0, S, 0, 1, inplace_of=7)],
            "memory plan: buffer 0 may reuse buffer 7, which is not another buffer",
        ),
    ],
)
def test_malformed_buffers(buffers: list[Buffer], message: str) -> None:
    with pytest.raises(MemoryPlanError) as error:
        plan(buffers)
    assert str(error.value) == message


def test_memory_plan_error_is_a_gnomon_error() -> None:
    assert issubclass(MemoryPlanError, GnomonError)


def test_verify_catches_an_injected_overlap() -> None:
    buffers = diamond(inplace=False)
    result = plan(buffers)
    offsets = dict(result.offsets)
    offsets[2] = offsets[1]  # c onto b: both are live at steps 2..3
    broken = MemoryPlan(offsets, result.arena_size, result.inplace, result.lower_bound, result.alignment)
    b, c = offsets[1], offsets[2]
    with pytest.raises(MemoryPlanError) as error:
        verify(buffers, broken)
    assert str(error.value) == (
        f"memory plan: buffers 1 (steps 1..3, bytes [{b}, {b + S})) and 2 (steps 2..3, bytes [{c}, {c + S}))"
        " are live at the same time and overlap in memory"
    )


def test_verify_names_a_partial_overlap() -> None:
    buffers = [Buffer(1, 128, 0, 2), Buffer(2, 128, 1, 3)]
    broken = MemoryPlan({1: 0, 2: 64}, 192, {}, 256, 64)
    with pytest.raises(MemoryPlanError) as error:
        verify(buffers, broken)
    assert str(error.value) == (
        "memory plan: buffers 1 (steps 0..2, bytes [0, 128)) and 2 (steps 1..3, bytes [64, 192))"
        " are live at the same time and overlap in memory"
    )


def test_verify_allows_sharing_only_at_the_handover() -> None:
    buffers = chain_of_three(inplace=True)
    verify(buffers, MemoryPlan({0: 0, 1: 0, 2: 0}, S, {1: 0, 2: 1}, S, 64))
    with pytest.raises(MemoryPlanError, match=r"buffers 0 \(steps 0\.\.1, bytes \[0, 1024\)\) and 1 "):
        verify(buffers, MemoryPlan({0: 0, 1: 0, 2: 0}, S, {2: 1}, S, 64))  # 1 does not reuse 0 in this plan
    lingering = [Buffer(0, S, 0, 2), Buffer(1, S, 1, 3, inplace_of=0)]
    with pytest.raises(MemoryPlanError, match="are live at the same time and overlap"):
        verify(lingering, MemoryPlan({0: 0, 1: 0}, S, {1: 0}, S, 64))  # 0 is still read at step 2


def test_verify_catches_a_buffer_past_the_arena() -> None:
    with pytest.raises(MemoryPlanError) as error:
        verify([Buffer(4, 100, 0, 1)], MemoryPlan({4: 64}, 128, {}, 100, 64))
    assert str(error.value) == "memory plan: buffer 4 (steps 0..1, bytes [64, 164)) exceeds the arena of 128 bytes"


def test_verify_catches_a_misaligned_offset() -> None:
    with pytest.raises(MemoryPlanError) as error:
        verify([Buffer(4, 100, 0, 1)], MemoryPlan({4: 32}, 132, {}, 100, 64))
    assert str(error.value) == (
        "memory plan: buffer 4 (steps 0..1, bytes [32, 132)) is not at a non-negative multiple of the alignment 64"
    )


def test_verify_catches_a_missing_offset() -> None:
    with pytest.raises(MemoryPlanError) as error:
        verify([Buffer(4, 100, 0, 1)], MemoryPlan({}, 0, {}, 0, 64))
    assert str(error.value) == "memory plan: buffer 4 (steps 0..1) has no offset"


SIZES = st.one_of(st.sampled_from([0, 64, 256, 1024]), st.integers(0, 5000))


@st.composite
def intervals(draw: st.DrawFn) -> list[Buffer]:
    """Arbitrary live ranges and in-place requests, most of them illegal."""
    steps = draw(st.integers(1, 12))
    count = draw(st.integers(0, 25))
    buffers: list[Buffer] = []
    for i in range(count):
        first = draw(st.integers(0, steps - 1))
        last = draw(st.integers(first, steps))
        others = [j for j in range(count) if j != i]
        inplace_of = draw(st.none() | st.sampled_from(others)) if others else None
        buffers.append(Buffer(i, draw(SIZES), first, last, inplace_of))
    return buffers


@st.composite
def programs(draw: st.DrawFn) -> list[Buffer]:
    """Straight-line programs: step i reads some earlier buffers and writes buffer i, maybe in place of an input."""
    count = draw(st.integers(1, 30))
    inputs = [draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else [] for i in range(count)]
    outputs = draw(st.sets(st.integers(0, count - 1)))
    last = [count if i in outputs else i for i in range(count)]
    for step, used in enumerate(inputs):
        for j in used:
            last[j] = max(last[j], step)
    sizes = [draw(SIZES) for _ in range(count)]
    return [
        Buffer(i, sizes[i], i, last[i], draw(st.none() | st.sampled_from(inputs[i])) if inputs[i] else None)
        for i in range(count)
    ]


@settings(max_examples=200, deadline=None)
@given(buffers=intervals(), alignment=st.sampled_from([1, 16, 64]))
def test_random_intervals(buffers: list[Buffer], alignment: int) -> None:
    check(buffers, plan(buffers, alignment))


@settings(max_examples=200, deadline=None)
@given(buffers=programs(), alignment=st.sampled_from([1, 64]))
def test_random_programs(buffers: list[Buffer], alignment: int) -> None:
    check(buffers, plan(buffers, alignment))


def bench_module() -> ModuleType:
    """bench/memory_plan.py, which turns a graph function into a schedule's buffers."""
    return load_script(Path(__file__).parents[1] / "bench" / "memory_plan.py")


QUICK_MODELS = {"light_resnet50", "light_densenet121"}


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(
            p,
            id=p.stem,
            marks=[pytest.mark.xdist_group(p.stem), *([] if p.stem in QUICK_MODELS else [pytest.mark.slow])],
        )
        for p in LIGHT_NETWORKS
    ],
)
@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "no-inplace"])
def test_light_models_plan_within_five_percent_of_the_bound(model_cache: ModelCache, path: Path, inplace: bool) -> None:
    buffers: list[Buffer] = bench_module().model_buffers(model_cache.imported(path), inplace=inplace)
    result = plan(buffers)
    check(buffers, result)
    assert result.arena_size <= 1.05 * result.lower_bound
    assert bool(result.inplace) == inplace
