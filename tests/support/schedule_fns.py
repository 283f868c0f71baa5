"""Schedule functions to tune, importable as ``schedule_fns:NAME`` (this folder is on
the tests' path): for ``workloads.mm_relu`` and the operator library's matmul."""

from __future__ import annotations

from compiler.schedule import Schedule

NOT_A_FUNCTION = 3


def tile_matmul_relu(sch: Schedule) -> None:
    """The TensorIR tutorial's stochastic schedule: j tiled at random, the relu under
    the outer j loop, the reduction's initialization split out."""
    block = sch.get_block("Y")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=8))
    sch.reorder(i, j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    sch.decompose_reduction(block, k)


def tile_matmul(sch: Schedule) -> None:
    """Tiles of i and j of the operator library's matmul (block ``T_matmul``)."""
    i, j, k = sch.get_loops(sch.get_block("T_matmul"))
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=8))
    sch.reorder(i0, j0, k, i1, j1)


def fixed_tiles(sch: Schedule) -> None:
    """No sampling instruction: nothing to search."""
    i, _, _ = sch.get_loops(sch.get_block("T_matmul"))
    sch.split(i, [None, 4])


def raises_midway(sch: Schedule) -> None:
    """A schedule function with a bug of its own (not a refused primitive)."""
    sch.sample_perfect_tile(sch.get_loops(sch.get_block("T_matmul"))[0], n=2)
    raise ZeroDivisionError("a bug in the user's function")
