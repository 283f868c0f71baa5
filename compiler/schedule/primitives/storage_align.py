"""storage_align: pad a buffer's rows so that a dimension's stride is ``factor * k +
offset`` elements.

Threads of a warp that read a column of a shared-memory tile hit one memory bank
when the row length is a multiple of 32 words; one extra word per row spreads them
over all banks. The padding changes where elements live, never which element an
index names, so the program computes the same values. It is recorded on the
function (``STORAGE_ALIGN_ATTR``, by buffer name) and applied where lowering sizes
the buffer's allocation (``compiler.lower.align_storage``).
"""

from __future__ import annotations

from compiler.ir.function import PrimFunc
from compiler.ir.stmt import Block
from compiler.schedule.errors import ScheduleError
from compiler.schedule.primitives.dataflow import is_param, locate, writes_of

STORAGE_ALIGN_ATTR = "tensortune.storage_align"


def storage_align(
    func: PrimFunc, block: Block, buffer_index: int, axis: int, factor: int, offset: int
) -> PrimFunc:
    """Align the stride of ``axis`` of the ``buffer_index``-th buffer ``block``
    writes to ``factor * k + offset`` elements."""
    locate(func, block, "storage_align")
    what = f"storage_align of block {block.name!r}"
    written = writes_of(block)
    if not 0 <= buffer_index < len(written):
        raise ScheduleError(
            f"{what}: it writes {len(written)} buffer(s), so buffer_index {buffer_index} "
            "is out of range"
        )
    buffer = written[buffer_index]
    if is_param(func, buffer):
        raise ScheduleError(
            f"{what}: {buffer.name!r} is a function parameter, whose layout the caller owns; "
            "align a cache of it (cache_read/cache_write) instead"
        )
    if not -buffer.ndim <= axis < buffer.ndim:
        raise ScheduleError(f"{what}: {buffer.name!r} has {buffer.ndim} dimensions, no axis {axis}")
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
        raise ScheduleError(f"{what}: factor must be a positive integer, got {factor!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < factor:
        raise ScheduleError(f"{what}: offset must be an integer in [0, {factor}), got {offset!r}")
    aligned = dict(func.attrs.get(STORAGE_ALIGN_ATTR, {}))
    rules = [r for r in aligned.get(buffer.name, []) if r[0] != axis % buffer.ndim]
    aligned[buffer.name] = [*rules, [axis % buffer.ndim, factor, offset]]
    return func.with_attr(STORAGE_ALIGN_ATTR, aligned)
