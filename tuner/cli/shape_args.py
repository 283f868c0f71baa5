"""What ``--shape`` and ``--arg NAME=VALUE`` mean for each op on the command line.

Every op in ``compiler.workload.spec.OPS`` can be named with numbers and named
values instead of a whole spec: the numbers fill the op's required arguments. An op whose required
arguments are sizes (matmul's m n k, conv2d's batch in_channels height width
out_channels kernel) takes one number each, in declared order; an op over a tensor
shape (relu, softmax, add, layer_norm, pad ...) takes the numbers as that shape (both
operands of a binary op get it). Required arguments of other kinds (pad's widths,
reshape's newshape, concatenate's shapes) and every optional one are given by name
(``--arg``).
The spec is checked afterwards by ``normalize_spec``, like any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiler.workload.spec import OPS, PAIR, POSITIVE, SHAPE_KIND, WorkloadError, known_ops


@dataclass(frozen=True)
class ShapeArguments:
    """The arguments of ``op`` that numbers fill: one number each (``sizes``), or all
    numbers as one shape (``shapes``, each getting the same); ``named`` are the
    required arguments that must be given by name."""

    op: str
    sizes: tuple[str, ...]
    shapes: tuple[str, ...]
    named: tuple[str, ...]

    @property
    def usage(self) -> str:
        """The numbers, as a usage line shows them: ``M N K`` or ``D1 [D2 ...]``."""
        if self.shapes:
            return "D1 [D2 ...]"
        return " ".join(name.upper() for name in self.sizes)

    def spec(self, numbers: Sequence[int] | None, named: Mapping[str, Any]) -> dict[str, Any]:
        """The (unchecked) spec these numbers and named values make; raises
        WorkloadError naming what is missing, extra or given twice."""
        args: dict[str, Any] = {}
        if numbers is not None:
            args.update(self._filled(list(numbers)))
        elif self.sizes or self.shapes:
            raise WorkloadError(f"{self.op} needs --shape {self.usage}")
        for name, value in named.items():
            if name in args:
                raise WorkloadError(f"{name} is given by --shape and by --arg; give it once")
            args[name] = value
        missing = [name for name in self.named if name not in args]
        if missing:
            raise WorkloadError(
                f"{self.op} needs {' '.join(f'--arg {m}=...' for m in missing)} too"
            )
        return {"op": self.op, "args": args}

    def _filled(self, numbers: list[int]) -> dict[str, Any]:
        if self.shapes:
            if not numbers:
                raise WorkloadError(f"{self.op} needs --shape {self.usage}")
            return {name: numbers for name in self.shapes}
        if len(numbers) != len(self.sizes):
            if not self.sizes:
                raise WorkloadError(
                    f"{self.op} takes no --shape; give {', '.join(self.named)} with --arg"
                )
            raise WorkloadError(
                f"{self.op} needs --shape {self.usage} ({len(self.sizes)} positive integers), "
                f"got {' '.join(map(str, numbers))}"
            )
        return dict(zip(self.sizes, numbers, strict=True))


def shape_arguments(op: str) -> ShapeArguments:
    """How numbers name a workload of ``op``; raises WorkloadError for an unknown op."""
    if op not in OPS:
        raise WorkloadError(f"op: unknown operator {op!r}; known ops: {', '.join(known_ops())}")
    required = [arg for arg in OPS[op].args if arg.required]
    shapes = tuple(arg.name for arg in required if arg.kind is SHAPE_KIND)
    sizes = () if shapes else tuple(a.name for a in required if a.kind in (POSITIVE, PAIR))
    named = tuple(arg.name for arg in required if arg.name not in shapes + sizes)
    return ShapeArguments(op, sizes, shapes, named)
