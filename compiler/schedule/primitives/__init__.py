"""Pure schedule primitives: each takes a PrimFunc (and IR nodes) and returns a new
PrimFunc, or raises ScheduleError and changes nothing."""

from compiler.schedule.primitives.cache import cache_read, cache_write
from compiler.schedule.primitives.common import block_names, child_block_names, loops_above
from compiler.schedule.primitives.compute_location import (
    compute_at,
    reverse_compute_at,
    sample_compute_location,
)
from compiler.schedule.primitives.inline import compute_inline, reverse_compute_inline
from compiler.schedule.primitives.layout import transform_layout
from compiler.schedule.primitives.loops import (
    THREAD_AXES,
    annotate,
    bind,
    fuse,
    reorder,
    set_loop_kind,
    split,
)
from compiler.schedule.primitives.reduction import decompose_reduction
from compiler.schedule.primitives.rfactor import rfactor
from compiler.schedule.primitives.sampling import sample_categorical, sample_perfect_tile
from compiler.schedule.primitives.storage_align import storage_align

__all__ = [
    "THREAD_AXES",
    "annotate",
    "bind",
    "block_names",
    "cache_read",
    "cache_write",
    "child_block_names",
    "compute_at",
    "compute_inline",
    "decompose_reduction",
    "fuse",
    "loops_above",
    "reorder",
    "reverse_compute_at",
    "reverse_compute_inline",
    "rfactor",
    "sample_categorical",
    "sample_compute_location",
    "sample_perfect_tile",
    "set_loop_kind",
    "split",
    "storage_align",
    "transform_layout",
]
