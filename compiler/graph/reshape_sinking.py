"""Reshapes moved out of the way of fusion.

A reshape of a row-major array moves no data: the executor runs one as a view of
its input (``compiler.graph.fuse.FusedGroup.is_view``), not as a kernel. But it
still cuts fusion chains: ONNX's MatMul of a (1, 128, 768) activation becomes
``reshape -> matmul -> reshape``, and the bias add, GELU and residual add that
follow would each be a kernel of their own. ``sink_reshapes`` moves a reshape
below the elementwise nodes that read it, so they join the matmul's group as its
epilogue, by three local rules applied until none applies:

- ``reshape(reshape(x))`` -> ``reshape(x)``
- ``f(reshape(x))`` -> ``reshape(f(x))`` for an elementwise ``f``
- ``g(reshape(x), y)`` -> ``reshape(g(x, y'))`` for a broadcast ``g`` whose other
  operands fit ``x`` as they fit the reshape: one element, a value of the same
  shape (``y' = reshape(y)``, a view too), or a constant over trailing dimensions
  that the reshape keeps (a bias)

each only where the reshape's result is no model output and every node that reads
it is elementwise or broadcast. A reshape that several such nodes read (GELU reads
its input twice) sinks below each of them in turn and goes once none reads it, so
the activation meets the matmul's result unreshaped and fuses with it
(``compiler.graph.fuse``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from functools import partial

from compiler.graph.fuse import TAKES_EPILOGUE
from compiler.graph.ir import Graph, Node, TensorType
from compiler.graph.ops import OPS, Pattern
from compiler.graph.passes import bypass, rewrite_until_done, sink_below

RESHAPE = "reshape"
MOVABLE = (Pattern.ELEMWISE, Pattern.BROADCAST)


def sink_reshapes(graph: Graph) -> Graph:
    """``graph`` with its reshapes below the elementwise nodes that read them."""
    return rewrite_until_done(graph, _apply_one_rule, "sunk")


def _apply_one_rule(graph: Graph, names: Iterator[str]) -> bool:
    producer = graph.producer()
    consumers = graph.consumers()
    for node in graph.nodes:
        if node.op == RESHAPE and node.output not in graph.outputs and node.output not in consumers:
            graph.nodes.remove(node)  # every reader moved below it
            del graph.types[node.output]
            return True
        if (
            node.op == RESHAPE
            and graph.types[node.inputs[0]].shape == graph.types[node.output].shape
        ):
            if node.output not in graph.outputs:
                bypass(graph, node, node.inputs[0])
                return True
        for value in node.inputs:
            reshape = producer.get(value)
            if reshape is None or reshape.op != RESHAPE or value in graph.outputs:
                continue
            readers = consumers.get(value, [])
            if node.op == RESHAPE:
                if len(readers) == 1:
                    _merge(graph, reshape, node)
                    return True
                continue
            if not all(OPS[reader.op].pattern in MOVABLE for reader in readers):
                continue
            if _extends_chain(graph, reshape.inputs[0], producer, consumers):
                if _sink(graph, reshape, node, names, producer, consumers):
                    return True
    return False


def _alone(graph: Graph, value: str, consumers: dict[str, list[Node]]) -> bool:
    """Whether one node reads ``value`` and it is no model output."""
    return value not in graph.outputs and len(consumers.get(value, [])) == 1


def _extends_chain(
    graph: Graph, value: str, producer: dict[str, Node], consumers: dict[str, list[Node]]
) -> bool:
    """Whether a node after ``value`` could join the group that makes it: a node that
    takes an epilogue makes it, and only the reshape reads it."""
    made_by = producer.get(value)
    return (
        made_by is not None
        and OPS[made_by.op].pattern in TAKES_EPILOGUE
        and _alone(graph, value, consumers)
    )


def _merge(graph: Graph, inner: Node, outer: Node) -> None:
    merged = dataclasses.replace(outer, inputs=inner.inputs)
    graph.nodes[graph.nodes.index(outer)] = merged
    graph.nodes.remove(inner)
    del graph.types[inner.output]


def _sink(
    graph: Graph,
    reshape: Node,
    node: Node,
    names: Iterator[str],
    producer: dict[str, Node],
    consumers: dict[str, list[Node]],
) -> bool:
    """``node`` computed on the reshape's input and reshaped after, when its other
    operands fit (see the module docstring)."""
    fit = partial(
        _fit_operand,
        graph,
        before=graph.types[reshape.inputs[0]].shape,
        after=graph.types[reshape.output].shape,
        names=names,
        producer=producer,
        consumers=consumers,
    )
    return sink_below(graph, reshape, node, fit, names)


def _fit_operand(
    graph: Graph,
    value: str,
    added: list[Node],
    *,
    before: tuple[int, ...],
    after: tuple[int, ...],
    names: Iterator[str],
    producer: dict[str, Node],
    consumers: dict[str, list[Node]],
) -> str | None:
    """The operand that plays ``value``'s part against the reshape's input, or None
    (``producer`` and ``consumers`` of the graph as it is before the move)."""
    shape = graph.types[value].shape
    if graph.types[value].size == 1:
        return value if len(shape) <= len(before) else None
    if shape == after:
        made_by = producer.get(value)
        if made_by is not None and made_by.op == RESHAPE:
            if graph.types[made_by.inputs[0]].shape == before:
                return made_by.inputs[0] if len(consumers[value]) == 1 else None
        if _extends_chain(graph, value, producer, consumers):
            return None  # its own reshape may sink instead; doing both would go round
        name = next(names)
        graph.types[name] = TensorType(before, graph.types[value].dtype)
        added.append(Node(RESHAPE, (value,), name, {"shape": before}))
        return name
    trailing = _without_leading_ones(shape)
    kept = len(trailing) <= min(len(before), len(after)) and (
        before[len(before) - len(trailing) :] == trailing == after[len(after) - len(trailing) :]
    )
    if kept and shape == trailing:
        return value
    if not kept or value not in graph.constants:
        return None
    name = next(names)
    graph.constants[name] = graph.constants[value].reshape(trailing)
    graph.types[name] = TensorType(trailing, graph.types[value].dtype)
    return name


def _without_leading_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    start = next((k for k, d in enumerate(shape) if d != 1), len(shape))
    return shape[start:]
