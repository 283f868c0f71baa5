"""PrimFunc (one kernel) and IRModule (named kernels)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from compiler.ir.buffer import Buffer
from compiler.ir.expr import Var
from compiler.ir.node import TEXT_FORMS, Node, visit
from compiler.ir.stmt import Block, BlockRealize, Stmt


@dataclass(frozen=True, eq=False, repr=False)
class PrimFunc(Node):
    """A kernel: its parameters are buffers; symbolic sizes are the variables in
    their shapes. The body is a ``BlockRealize`` of the root block."""

    params: tuple[Buffer, ...]
    body: Stmt
    attrs: dict[str, Any] = field(default_factory=dict)

    def with_attr(self, key: str, value: Any) -> PrimFunc:
        return dataclasses.replace(self, attrs={**self.attrs, key: value})

    @property
    def root_block(self) -> Block:
        assert isinstance(self.body, BlockRealize)
        return self.body.block

    @property
    def size_vars(self) -> list[Var]:
        """Symbolic sizes in order of first appearance in the parameter shapes."""
        found: list[Var] = []

        def collect(node: Node) -> None:
            if isinstance(node, Var) and all(v is not node for v in found):
                found.append(node)

        for param in self.params:
            for dim in param.shape:
                visit(dim, collect)
        return found

    def script(self, name: str | None = None) -> str:
        return TEXT_FORMS["func"](self, name or self.attrs.get("global_symbol", "main"))

    def show(self) -> None:
        print(self.script())

    def __str__(self) -> str:
        return self.script()

    __repr__ = __str__


class IRModule(Mapping[str, PrimFunc]):
    """An immutable mapping from function names to PrimFuncs."""

    def __init__(self, functions: Mapping[str, PrimFunc] | None = None) -> None:
        self._functions = dict(functions or {})
        for name, func in self._functions.items():
            if not isinstance(func, PrimFunc):
                raise TypeError(f"IRModule entry {name!r} is {type(func).__name__}, not a PrimFunc")

    def __getitem__(self, name: str) -> PrimFunc:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(
                f"no function {name!r} in the module; it has {sorted(self._functions)}"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    @property
    def functions(self) -> dict[str, PrimFunc]:
        return dict(self._functions)

    def with_function(self, name: str, func: PrimFunc) -> IRModule:
        return IRModule({**self._functions, name: func})

    def script(self) -> str:
        return TEXT_FORMS["module"](self)

    def show(self) -> None:
        print(self.script())

    def __str__(self) -> str:
        return self.script()

    __repr__ = __str__
