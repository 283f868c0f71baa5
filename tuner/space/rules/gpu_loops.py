"""What the GPU rules read about the loops around a block: which of them are bound
to GPU thread axes."""

from __future__ import annotations

from compiler.ir.stmt import For
from compiler.schedule import BlockRV, Schedule
from tuner.space.rules.analysis import loops_of


def axis_of(loop: For) -> str:
    """The thread axis kind a loop is bound to (``blockIdx``, ``threadIdx``,
    ``vthread``), "" when it is not bound."""
    return (loop.thread_binding or "").partition(".")[0]


def is_bound(sch: Schedule, block: BlockRV) -> bool:
    """Some loop around the block is bound to a block or thread axis: a rule has
    already placed it on the GPU."""
    return any(axis_of(loop) in ("blockIdx", "threadIdx") for loop in loops_of(sch, block))
