"""The lowering pipeline: an ordered list of named passes from scheduled IR to flat loops.

Each pass is a plain function PrimFunc -> PrimFunc. ``lower_func`` runs them in
order; ``dump_after`` names passes whose output is printed, and ``observe`` is
called with every pass's name and output (``build(..., dump_ir=folder)`` writes
them to files), which is how one looks at what a pass did without a debugger.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from compiler.arith.access_bounds import check_accesses
from compiler.ir.function import IRModule, PrimFunc
from compiler.lower.align_storage import align_storage
from compiler.lower.compact_buffers import compact_buffers
from compiler.lower.flatten_buffers import flatten_buffers
from compiler.lower.hoist_conditions import hoist_conditions
from compiler.lower.lower_blocks import lower_blocks
from compiler.lower.simplify import simplify


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[PrimFunc], PrimFunc]


PASSES: tuple[Pass, ...] = (
    Pass("lower_blocks", lower_blocks),
    Pass("compact_buffers", compact_buffers),
    Pass("align_storage", align_storage),
    Pass("simplify", simplify),
    Pass("hoist_conditions", hoist_conditions),
    Pass("check_accesses", check_accesses),
    Pass("flatten_buffers", flatten_buffers),
)

PASS_NAMES = tuple(p.name for p in PASSES)


PassObserver = Callable[[str, PrimFunc], None]


def lower_func(
    func: PrimFunc,
    dump_after: Collection[str] = (),
    out: TextIO | None = None,
    passes: Sequence[Pass] = PASSES,
    observe: PassObserver | None = None,
) -> PrimFunc:
    """Run ``passes`` over ``func``; print the IR after each pass named in ``dump_after``
    (a name, a collection of names, or ``"all"``) to ``out`` (stderr by default), and
    hand ``observe`` the name and output of every pass (``"input"`` first)."""
    names = {p.name for p in passes}
    requested = {dump_after} if isinstance(dump_after, str) else set(dump_after)
    wanted = set(names) if "all" in requested else requested
    unknown = wanted - names
    if unknown:
        raise ValueError(
            f"dump_after names unknown passes {sorted(unknown)}; the passes are "
            f"{[p.name for p in passes]} (or 'all')"
        )
    if observe is not None:
        observe("input", func)
    for lowering_pass in passes:
        func = lowering_pass.run(func)
        if observe is not None:
            observe(lowering_pass.name, func)
        if lowering_pass.name in wanted:
            stream = out if out is not None else sys.stderr
            print(f"# IR after {lowering_pass.name}", file=stream)
            print(func.script(), file=stream)
    return func


def to_ir_module(obj: Any, args: Sequence[Any] | None = None, name: str = "main") -> IRModule:
    """Accept what users hand to ``build``/``lower``: an IRModule, a PrimFunc, a
    Schedule (its ``.mod``), or a TE-style schedule with ``to_ir_module(args, name)``."""
    if isinstance(obj, IRModule):
        return obj
    if isinstance(obj, PrimFunc):
        return IRModule({obj.attrs.get("global_symbol", name): obj})
    if hasattr(obj, "to_ir_module"):
        return to_ir_module(obj.to_ir_module(args, name), name=name)
    mod = getattr(obj, "mod", None)
    if isinstance(mod, IRModule):
        return mod
    raise TypeError(
        f"cannot lower a {type(obj).__name__}; pass an IRModule, a PrimFunc, a Schedule "
        "or an object with to_ir_module(args, name) (a te.create_schedule result)"
    )


def lower(
    obj: Any,
    args: Sequence[Any] | None = None,
    simple_mode: bool = False,
    name: str = "main",
    dump_after: Collection[str] = (),
) -> IRModule:
    """The lowered IRModule of ``obj``; ``simple_mode`` drops function attributes so
    the printout shows just the loops."""
    mod = to_ir_module(obj, args, name)
    lowered = {}
    for func_name, func in mod.items():
        func = lower_func(func, dump_after)
        if simple_mode:
            func = dataclasses.replace(func, attrs={})
        lowered[func_name] = func
    return IRModule(lowered)
