"""Tile factors that become virtual threads, kept within what GPU lowering accepts.

A GPU design splits each spatial loop with ``sample_perfect_tile`` and binds one
level of every split, fused, to ``vthread``. The product of those factors is the
number of virtual threads a thread interleaves, which GPU lowering refuses beyond
``MAX_VIRTUAL_THREADS`` (as MetaSchedule's VerifyGPUCode does). Drawn freely, the
factors of a 1024-long loop put that level past 8 in most draws, so most points
of a matmul's space were refused. Each such factor is capped here in its
decision's domain instead: at the largest ``c`` with ``c ** k <= 8`` for ``k``
loops longer than 1 fused into the binding, so every combination stays legal, and
random points and mutations never leave the legal ones.
"""

from __future__ import annotations

import math
from typing import Any

from compiler.lower.virtual_threads import MAX_VIRTUAL_THREADS
from compiler.schedule import Trace
from tuner.space.base import Domain


def virtual_thread_caps(trace: Trace) -> dict[int, tuple[int, int]]:
    """For each ``sample_perfect_tile`` of ``trace`` (by index) whose factor at some
    position becomes a virtual-thread loop: that position and its cap."""
    caps: dict[int, tuple[int, int]] = {}
    for bind in trace.instructions:
        if bind.kind != "bind" or not str(bind.inputs["thread_axis"]).startswith("vthread"):
            continue
        sources = [_tile_source(trace, loop) for loop in _fused_loops(trace, bind.inputs["loop"])]
        tiled = [source for source in sources if source is not None]
        longer = sum(1 for index, _ in tiled if math.prod(trace.instructions[index].decision) > 1)
        cap = _largest_root(MAX_VIRTUAL_THREADS, max(longer, 1))
        for index, position in tiled:
            caps[index] = (position, cap)
    return caps


def capped(domain: Domain, position: int, cap: int) -> Domain:
    """``domain`` without the tilings whose factor at ``position`` exceeds ``cap``."""
    kept = tuple(tile for tile in domain.values if tile[position] <= cap)
    return Domain(domain.kind, kept, domain.candidates, role=domain.role)


def _fused_loops(trace: Trace, loop: Any) -> list[Any]:
    """The loops that ``fuse`` joined into ``loop``, or ``loop`` itself."""
    for inst in trace.instructions:
        if inst.kind == "fuse" and inst.outputs and inst.outputs[0] is loop:
            return list(inst.inputs["loops"])
    return [loop]


def _tile_source(trace: Trace, loop: Any) -> tuple[int, int] | None:
    """The ``sample_perfect_tile`` (its index) and the position of its factor that
    gave ``loop`` its extent through a ``split``; None when no sampled split did."""
    for inst in trace.instructions:
        if inst.kind != "split" or not any(out is loop for out in inst.outputs):
            continue
        position = next(k for k, out in enumerate(inst.outputs) if out is loop)
        factor = inst.inputs["factors"][position]
        for index, sample in enumerate(trace.instructions):
            if sample.kind == "sample_perfect_tile" and any(f is factor for f in sample.outputs):
                return index, next(k for k, f in enumerate(sample.outputs) if f is factor)
    return None


def _largest_root(limit: int, k: int) -> int:
    """The largest ``c`` with ``c ** k <= limit``."""
    c = 1
    while (c + 1) ** k <= limit:
        c += 1
    return c
