"""What runs a compiled model: the steps (function, values read, value made), the
values that are views of others (reshapes, which move no data) and the type of
every value, as plain data that ``export`` writes as JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compiler.graph.ir import TensorType


@dataclass(frozen=True)
class Step:
    """Call ``function`` (of workload ``key``, the fused group ``kind``) on ``inputs``,
    writing ``output``."""

    function: str
    key: str
    inputs: tuple[str, ...]
    output: str
    kind: str = ""


@dataclass(frozen=True)
class View:
    """``output`` is ``source``'s memory in ``output``'s shape: a reshape, no kernel."""

    output: str
    source: str


@dataclass(frozen=True)
class Plan:
    """``views`` are listed so that a view's source is a step's output, a weight, an
    input or an earlier view."""

    inputs: dict[str, TensorType]
    outputs: tuple[str, ...]
    types: dict[str, TensorType]
    steps: tuple[Step, ...]
    views: tuple[View, ...] = ()

    def to_json(self) -> dict[str, Any]:
        def typed(types: Mapping[str, TensorType]) -> dict[str, Any]:
            return {name: {"shape": list(t.shape), "dtype": t.dtype} for name, t in types.items()}

        return {
            "inputs": typed(self.inputs),
            "outputs": list(self.outputs),
            "types": typed(self.types),
            "steps": [
                {
                    "function": s.function,
                    "key": s.key,
                    "inputs": list(s.inputs),
                    "output": s.output,
                    "kind": s.kind,
                }
                for s in self.steps
            ],
            "views": [{"output": v.output, "source": v.source} for v in self.views],
        }

    @staticmethod
    def from_json(document: Mapping[str, Any]) -> Plan:
        def typed(types: Mapping[str, Any]) -> dict[str, TensorType]:
            return {n: TensorType(tuple(t["shape"]), t["dtype"]) for n, t in types.items()}

        steps = tuple(
            Step(s["function"], s["key"], tuple(s["inputs"]), s["output"], s.get("kind", ""))
            for s in document["steps"]
        )
        views = tuple(View(v["output"], v["source"]) for v in document.get("views", []))
        return Plan(
            typed(document["inputs"]),
            tuple(document["outputs"]),
            typed(document["types"]),
            steps,
            views,
        )
