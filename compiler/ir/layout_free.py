"""Parameters whose data stays the same from call to call: a model's weights.

A function marks them in its ``layout_free_buffers`` attribute (the parameters'
positions, as TVM names it), which makes the mark part of the workload: a kernel
whose weight may be stored in any layout is another tuning problem than one that
must read the caller's layout. A schedule may then store such a parameter in the
layout its tiling reads (``transform_layout``), and a build converts the weight
once instead of in every call (``compiler.lower.prepack``): Ansor's layout rewrite.
"""

from __future__ import annotations

from collections.abc import Iterable

from compiler.errors import CompilerError
from compiler.ir.buffer import Buffer
from compiler.ir.function import PrimFunc
from compiler.ir.stmt import Block

LAYOUT_FREE_ATTR = "layout_free_buffers"
# The annotation on a block that only converts a constant parameter into the form the
# rest of the function reads: a new layout, or a transformed weight such as
# Winograd's. Its value is the parameter's name, or True for the one parameter the
# block reads. A build runs such a block once per weight instead of in every call.
LAYOUT_REWRITE_ATTR = "layout_rewrite"
# The attribute of a function that a build split out of another to run such a block
# (``compiler.lower.prepack``): it runs once per weight, not once per call, so its
# code is compiled for a short compile more than for speed.
CONVERTS_WEIGHT_ATTR = "converts_weight"


class LayoutFreeError(CompilerError, ValueError):
    """A parameter named as constant that the function does not have, or writes."""


def mark_layout_free(func: PrimFunc, params: Iterable[str | int]) -> PrimFunc:
    """``func`` with the parameters ``params`` (names or positions) marked constant,
    added to those already marked. An output cannot be constant."""
    positions = set(layout_free_positions(func))
    names = [p.name for p in func.params]
    for param in params:
        if isinstance(param, str):
            if param not in names:
                raise LayoutFreeError(
                    f"constant parameter {param!r}: the function's parameters are {names}"
                )
            positions.add(names.index(param))
        elif isinstance(param, int) and not isinstance(param, bool) and 0 <= param < len(names):
            positions.add(param)
        else:
            raise LayoutFreeError(
                f"constant parameter {param!r}: name one of {names} or give its position "
                f"0..{len(names) - 1}"
            )
    if len(func.params) - 1 in positions:
        raise LayoutFreeError(
            f"constant parameter {names[-1]!r} is the function's output; only inputs can be "
            "constant"
        )
    return func.with_attr(LAYOUT_FREE_ATTR, sorted(positions))


def layout_free_positions(func: PrimFunc) -> tuple[int, ...]:
    """The positions of the parameters ``func`` marks constant (none when unmarked)."""
    marked = func.attrs.get(LAYOUT_FREE_ATTR, ())
    if not isinstance(marked, (list, tuple)) or not all(
        isinstance(p, int) and not isinstance(p, bool) and 0 <= p < len(func.params) for p in marked
    ):
        raise LayoutFreeError(
            f"attribute {LAYOUT_FREE_ATTR}={marked!r}: must list positions of parameters, "
            f"0..{len(func.params) - 1}"
        )
    return tuple(sorted(set(marked)))


def layout_free_params(func: PrimFunc) -> list[Buffer]:
    """The parameters ``func`` marks constant."""
    return [func.params[k] for k in layout_free_positions(func)]


def is_conversion(block: Block) -> bool:
    """Whether ``block`` only converts a constant parameter (see LAYOUT_REWRITE_ATTR):
    it runs once per weight, so schedules leave it plain."""
    return LAYOUT_REWRITE_ATTR in block.annotations
