"""Graphs written by hand for the graph tests: each node's type is inferred the way
the frontend infers it (``compiler.graph.ops.output_type``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler.graph.ir import Graph, Node, TensorType
from compiler.graph.ops import output_type


class GraphBuilder:
    def __init__(self) -> None:
        self.graph = Graph(inputs={}, constants={}, nodes=[], outputs=(), types={})

    def input(self, name: str, shape: tuple[int, ...]) -> str:
        self.graph.inputs[name] = self.graph.types[name] = TensorType(shape, "float32")
        return name

    def constant(self, name: str, array: np.ndarray) -> str:
        self.graph.constants[name] = array.astype("float32")
        self.graph.types[name] = TensorType(array.shape, "float32")
        return name

    def node(self, op: str, *inputs: str, out: str, **attrs: Any) -> str:
        node = Node(op, inputs, out, attrs, name=out)
        self.graph.types[out] = output_type(node, [self.graph.types[v] for v in inputs])
        self.graph.nodes.append(node)
        return out

    def returns(self, *outputs: str) -> Graph:
        self.graph.outputs = outputs
        self.graph.check()
        return self.graph


CONV = {"stride": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1), "groups": 1}
