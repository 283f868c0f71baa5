"""What every compiled module is to its caller: its functions by name, and the one
that calling the module runs."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from compiler.lower.prepack import PACK_SUFFIX

F = TypeVar("F")


class FunctionTable(Mapping[str, F], Generic[F]):
    """Functions by name; ``module(*arrays)`` calls the entry: "main", or the only
    one. ``kind`` words the messages ("module", "GPU module")."""

    def __init__(self, functions: Mapping[str, F], kind: str = "module") -> None:
        self._functions = dict(functions)
        self._kind = kind

    def __getitem__(self, name: str) -> F:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(
                f"no function {name!r} in this {self._kind}; it has {sorted(self._functions)}"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    @property
    def entry_name(self) -> str:
        """The function that calling the module runs: "main", or the only one."""
        return entry_of(self._functions)

    def __call__(self, *arrays: Any) -> None:
        function: Any = self[self.entry_name]
        function(*arrays)


def entry_of(names: Iterable[str]) -> str:
    """The entry among ``names``: "main", or the only name besides the functions that
    convert its weights (``compiler.lower.prepack``)."""
    listed = list(names)
    if "main" in listed:
        return "main"
    kernels = [name for name in listed if PACK_SUFFIX not in name]
    if len(kernels) == 1:
        return kernels[0]
    raise KeyError(
        f"this module has several functions {sorted(listed)} and none is 'main'; call one "
        "by name: lib[name](...)"
    )
