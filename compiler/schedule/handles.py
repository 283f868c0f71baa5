"""Random variables: the handles a Schedule hands out for blocks, loops and sampled values.

A handle stays valid while the thing it names is in the function. Blocks are named
(names are unique within a function); loops are their loop variable, which every
primitive that keeps a loop keeps, and which a primitive that replaces a loop
(split, fuse) retires.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.ir.expr import Var


@dataclass(frozen=True, eq=False)
class BlockRV:
    name: str
    func_name: str

    def __repr__(self) -> str:
        return f"BlockRV({self.name!r})"


@dataclass(frozen=True, eq=False)
class LoopRV:
    var: Var
    func_name: str

    def __repr__(self) -> str:
        return f"LoopRV({self.var.name!r})"


class RootLocation:
    """The result of ``sample_compute_location`` meaning "stay at the root"."""

    def __repr__(self) -> str:
        return "RootLocation()"


class InlineLocation:
    """The result of ``sample_compute_location`` meaning "inline the block"."""

    def __repr__(self) -> str:
        return "InlineLocation()"


@dataclass(frozen=True, eq=False)
class ExprRV:
    """A sampled integer; usable wherever an int is (``factors=``, ``range``)."""

    value: int

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        return f"ExprRV({self.value})"
