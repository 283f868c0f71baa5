"""Running a whole model: each fused group built into a function (with the tuning
database's best schedule where it has one) and called in order on buffers that are
allocated once, when the module is made.

Groups that are the same workload (a block repeated through a network) share one
build. Weights are the graph's constants, passed to the functions at each call like
the other buffers; nothing is copied between calls but the inputs given to ``run``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

import compiler
from compiler.codegen.target import LLVMTarget
from compiler.graph.fuse import FusedGroup, fuse
from compiler.graph.ir import Graph, GraphError
from compiler.graph.passes import fold_scale_into_conv
from compiler.ir.function import PrimFunc
from compiler.runtime.module import Function
from compiler.schedule.tuned import TuningLookup
from compiler.workload.key import workload_key


@dataclass(frozen=True)
class GroupFunction:
    """One fused group as built: its function's workload key and the callable."""

    group: FusedGroup
    key: str
    function: Function


def optimize(graph: Graph) -> tuple[Graph, list[FusedGroup]]:
    """The graph after its passes, and its fused groups: the functions it becomes."""
    graph.check()
    optimized = fold_scale_into_conv(graph)
    optimized.check()
    return optimized, fuse(optimized)


class GraphModule:
    """``graph`` compiled for ``target``: ``run(**inputs)`` returns its outputs by name.

    With ``database``, every group whose workload has a tuned schedule for the target
    is built with it; the others get the default schedule."""

    def __init__(
        self,
        graph: Graph,
        target: str | LLVMTarget = "llvm",
        *,
        database: TuningLookup | None = None,
    ) -> None:
        self.graph, self.groups = optimize(graph)
        self.functions = _build_groups(self.graph, self.groups, target, database)
        self._buffers = {
            value: np.empty(self.graph.types[value].shape, self.graph.types[value].dtype)
            for value in [group.output for group in self.groups]
        }
        for name, array in self.graph.constants.items():
            self._buffers[name] = np.require(array, requirements="C")
        for name, kind in self.graph.inputs.items():
            self._buffers[name] = np.empty(kind.shape, kind.dtype)

    def run(self, **inputs: np.ndarray) -> dict[str, np.ndarray]:
        """The model's outputs on ``inputs`` (one array per model input, by name), as
        new arrays. GraphError names an input that is missing, unknown or of the wrong
        shape or dtype."""
        self._set_inputs(inputs)
        for built in self.functions:
            arguments = [self._buffers[value] for value in built.group.inputs]
            built.function(*arguments, self._buffers[built.group.output])
        return {name: self._buffers[name].copy() for name in self.graph.outputs}

    def _set_inputs(self, inputs: Mapping[str, np.ndarray]) -> None:
        expected = self.graph.inputs
        unknown = sorted(set(inputs) - set(expected))
        missing = sorted(set(expected) - set(inputs))
        if unknown or missing:
            raise GraphError(
                f"the model's inputs are {', '.join(expected)}; "
                + "; ".join(
                    part
                    for part in (
                        f"missing: {', '.join(missing)}" if missing else "",
                        f"unknown: {', '.join(unknown)}" if unknown else "",
                    )
                    if part
                )
            )
        for name, array in inputs.items():
            kind = expected[name]
            given = np.asarray(array)
            if given.shape != kind.shape or given.dtype != np.dtype(kind.dtype):
                raise GraphError(
                    f"input {name!r}: the model takes {kind.shape} {kind.dtype}, got "
                    f"{given.shape} {given.dtype}"
                )
            np.copyto(self._buffers[name], given)


def group_functions(graph: Graph, groups: list[FusedGroup]) -> list[PrimFunc]:
    """The PrimFunc of each group, in order."""
    return [group.prim_func(graph.types) for group in groups]


def _build_groups(
    graph: Graph,
    groups: list[FusedGroup],
    target: str | LLVMTarget,
    database: TuningLookup | None,
) -> list[GroupFunction]:
    built: dict[str, Function] = {}
    functions = []
    for group, func in zip(groups, group_functions(graph, groups), strict=True):
        key = workload_key(func)
        if key not in built:
            built[key] = compiler.build(func, target=target, database=database)["main"]
        functions.append(GroupFunction(group, key, built[key]))
    return functions
