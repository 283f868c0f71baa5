"""Random schedule moves: each draws a primitive and its arguments (blocks by name,
loops from ``get_loops``, factors, sampled tiles and compute locations) and applies
it, skipping what the schedule refuses. The schedule property tests and the compiler
fuzz test both drive schedules with them."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from hypothesis import strategies as st

from compiler.schedule import LoopRV, Schedule, ScheduleError
from compiler.schedule.primitives import block_names
from compiler.schedule.primitives.dataflow import reads_of, writes_of

T = TypeVar("T")


class Chooser(Protocol):
    """Where a move gets its random choices: hypothesis (which shrinks failures) or
    a plain ``random.Random`` (for the coverage check)."""

    def integer(self, low: int, high: int) -> int: ...

    def choice(self, items: Sequence[T]) -> T: ...


class HypothesisChooser:
    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def integer(self, low: int, high: int) -> int:
        return self.data.draw(st.integers(low, high))

    def choice(self, items: Sequence[T]) -> T:
        return self.data.draw(st.sampled_from(items))


class RandomChooser:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def choice(self, items: Sequence[T]) -> T:
        return self.rng.choice(items)


class Skip(Exception):
    """The move has nothing to act on here (no loops, a single loop to fuse)."""


def pick_block(sch: Schedule, ch: Chooser) -> Any:
    names = block_names(sch.mod["main"])
    return sch.get_block(ch.choice(names))


def pick_loop(sch: Schedule, ch: Chooser, block: Any = None) -> LoopRV:
    loops = sch.get_loops(block if block is not None else pick_block(sch, ch))
    if not loops:
        raise Skip
    return ch.choice(loops)


def move_split(sch: Schedule, ch: Chooser) -> None:
    loop = pick_loop(sch, ch)
    factors: list[int | None] = [ch.integer(1, 5) for _ in range(ch.integer(2, 3))]
    if ch.integer(0, 2) > 0:
        factors[ch.integer(0, len(factors) - 1)] = None
    sch.split(loop, factors)


def move_tile(sch: Schedule, ch: Chooser) -> None:
    loop = pick_loop(sch, ch)
    factors = sch.sample_perfect_tile(loop, n=ch.integer(2, 3), max_innermost_factor=4)
    sch.split(loop, factors)


def move_categorical_split(sch: Schedule, ch: Chooser) -> None:
    loop = pick_loop(sch, ch)
    probs = [float(ch.integer(0, 3)) for _ in range(3)]
    probs[ch.integer(0, 2)] += 1.0
    inner = sch.sample_categorical(candidates=[2, 3, 4], probs=probs)
    sch.split(loop, [None, inner])


def move_fuse(sch: Schedule, ch: Chooser) -> None:
    loops = sch.get_loops(pick_block(sch, ch))
    if len(loops) < 2:
        raise Skip
    start = ch.integer(0, len(loops) - 2)
    stop = ch.integer(start + 2, len(loops))
    sch.fuse(*loops[start:stop])


def move_reorder(sch: Schedule, ch: Chooser) -> None:
    loops = list(sch.get_loops(pick_block(sch, ch)))
    if len(loops) < 2:
        raise Skip
    chosen = []
    for _ in range(ch.integer(2, len(loops))):
        chosen.append(loops.pop(ch.integer(0, len(loops) - 1)))
    sch.reorder(*chosen)


def move_kind(kind: str) -> Callable[[Schedule, Chooser], None]:
    def move(sch: Schedule, ch: Chooser) -> None:
        getattr(sch, kind)(pick_loop(sch, ch))

    move.__name__ = f"move_{kind}"
    return move


def move_annotate(sch: Schedule, ch: Chooser) -> None:
    block = pick_block(sch, ch)
    target = block if ch.integer(0, 1) else pick_loop(sch, ch, block)
    sch.annotate(target, ch.choice(["note", "pragma"]), ch.choice([1, "x", [2, 3], True, 0.5]))


def pick_other_loop(sch: Schedule, ch: Chooser, block: Any) -> LoopRV:
    """A loop of another block than ``block``: where compute_at can move it."""
    others = [name for name in block_names(sch.mod["main"]) if name != block.name]
    if not others:
        raise Skip
    return pick_loop(sch, ch, sch.get_block(ch.choice(others)))


def move_compute_at(sch: Schedule, ch: Chooser) -> None:
    block = pick_block(sch, ch)
    loop = pick_other_loop(sch, ch, block)
    sch.compute_at(block, loop, preserve_unit_loops=bool(ch.integer(0, 1)))


def move_reverse_compute_at(sch: Schedule, ch: Chooser) -> None:
    block = pick_block(sch, ch)
    loop = pick_other_loop(sch, ch, block)
    sch.reverse_compute_at(block, loop, preserve_unit_loops=bool(ch.integer(0, 1)))


def move_sampled_location(sch: Schedule, ch: Chooser) -> None:
    block = pick_block(sch, ch)
    sch.compute_at(block, sch.sample_compute_location(block))


def move_compute_inline(sch: Schedule, ch: Chooser) -> None:
    sch.compute_inline(pick_block(sch, ch))


def move_reverse_compute_inline(sch: Schedule, ch: Chooser) -> None:
    sch.reverse_compute_inline(pick_block(sch, ch))


def move_cache_read(sch: Schedule, ch: Chooser) -> None:
    sch.cache_read(pick_block(sch, ch), ch.integer(0, 2), ch.choice(["global", "local"]))


def move_cache_write(sch: Schedule, ch: Chooser) -> None:
    sch.cache_write(pick_block(sch, ch), 0, ch.choice(["global", "local"]))


def move_decompose_reduction(sch: Schedule, ch: Chooser) -> None:
    block = pick_block(sch, ch)
    sch.decompose_reduction(block, pick_loop(sch, ch, block))


def move_rfactor(sch: Schedule, ch: Chooser) -> None:
    sch.rfactor(pick_loop(sch, ch), ch.integer(-2, 2))


def move_transform_layout(sch: Schedule, ch: Chooser) -> None:
    """Lay out a buffer of a block by a permutation (reversed dimensions) or by a
    split of one dimension (inner part last); factors that do not divide are refused."""
    block = pick_block(sch, ch)
    target = sch.get(block)
    buffers = [*reads_of(target), *writes_of(target)]
    buffer = ch.choice(buffers)
    names = [f"a{k}" for k in range(buffer.ndim)]
    if ch.integer(0, 1):
        outputs = names[::-1]
    else:
        k, factor = ch.integer(0, buffer.ndim - 1), ch.integer(2, 3)
        outputs = [*names[:k], f"{names[k]} // {factor}", *names[k + 1 :], f"{names[k]} % {factor}"]
    sch.transform_layout(block, buffer.name, f"{', '.join(names)} -> {', '.join(outputs)}")


MOVES: dict[str, Callable[[Schedule, Chooser], None]] = {
    "split": move_split,
    "sample_perfect_tile": move_tile,
    "sample_categorical": move_categorical_split,
    "fuse": move_fuse,
    "reorder": move_reorder,
    "parallel": move_kind("parallel"),
    "vectorize": move_kind("vectorize"),
    "unroll": move_kind("unroll"),
    "annotate": move_annotate,
    "compute_at": move_compute_at,
    "reverse_compute_at": move_reverse_compute_at,
    "sample_compute_location": move_sampled_location,
    "compute_inline": move_compute_inline,
    "reverse_compute_inline": move_reverse_compute_inline,
    "cache_read": move_cache_read,
    "cache_write": move_cache_write,
    "decompose_reduction": move_decompose_reduction,
    "rfactor": move_rfactor,
    "transform_layout": move_transform_layout,
}


def apply_moves(sch: Schedule, ch: Chooser, count: int) -> list[str]:
    """Apply ``count`` random moves; the names of those that took effect, in order."""
    applied = []
    for _ in range(count):
        name = ch.choice(sorted(MOVES))
        try:
            MOVES[name](sch, ch)
        except Skip:
            continue
        except ScheduleError:
            continue
        applied.append(name)
    return applied
