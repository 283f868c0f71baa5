"""The graph IR of a whole model: values with static types, and nodes that each apply
one operator of ``compiler.graph.ops`` to values and make one new value.

A frontend (``compiler.graph.onnx_import``) builds a Graph; passes
(``compiler.graph.passes``) rewrite it into another; fusion
(``compiler.graph.fuse``) cuts it into groups, each of which becomes one PrimFunc.
Weights are constants of the graph (numpy arrays), which the functions take as
arguments like any other input: a workload is the same whatever its weights are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compiler.errors import CompilerError


class GraphError(CompilerError, ValueError):
    """A graph that does not hold together (a value used before it is made, a type
    that does not fit); the message names the node or value."""


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True)
class Node:
    """``output = op(*inputs, **attrs)``; ``name`` is the node's name in the model it
    came from, for messages."""

    op: str
    inputs: tuple[str, ...]
    output: str
    attrs: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""

    def __str__(self) -> str:
        attrs = ", ".join(f"{k}={v!r}" for k, v in self.attrs.items())
        call = ", ".join([*self.inputs, *([attrs] if attrs else [])])
        return f"{self.output} = {self.op}({call})"


@dataclass
class Graph:
    """Inputs (fed at each run), constants (the weights), nodes in an order where
    every value is made before it is used, and the outputs. ``types`` holds the type
    of every value."""

    inputs: dict[str, TensorType]
    constants: dict[str, np.ndarray]
    nodes: list[Node]
    outputs: tuple[str, ...]
    types: dict[str, TensorType]

    def check(self) -> None:
        """Raise GraphError unless every value is typed and made before it is used."""
        made = set(self.inputs) | set(self.constants)
        for node in self.nodes:
            for value in node.inputs:
                if value not in made:
                    raise GraphError(
                        f"node {node.name or node}: {value!r} is used before it is made"
                    )
            if node.output in made:
                raise GraphError(f"node {node.name or node}: {node.output!r} is made twice")
            made.add(node.output)
        for value in made:
            if value not in self.types:
                raise GraphError(f"value {value!r} has no type")
        for value in self.outputs:
            if value not in made:
                raise GraphError(f"output {value!r} is never made")

    def consumers(self) -> dict[str, list[Node]]:
        """The nodes that read each value (graph outputs count as no node)."""
        found: dict[str, list[Node]] = {}
        for node in self.nodes:
            for value in node.inputs:
                found.setdefault(value, []).append(node)
        return found

    def producer(self) -> dict[str, Node]:
        return {node.output: node for node in self.nodes}

    def __str__(self) -> str:
        lines = [f"input {name}: {t.shape} {t.dtype}" for name, t in self.inputs.items()]
        lines += [f"const {name}: {a.shape} {a.dtype}" for name, a in self.constants.items()]
        lines += [str(node) for node in self.nodes]
        lines.append(f"return {', '.join(self.outputs)}")
        return "\n".join(lines)
