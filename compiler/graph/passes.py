"""Graph passes that rewrite a Graph into an equivalent one with less work.

``fold_scale_into_conv``: the frontend turns a batch normalization (at inference)
into a per-channel ``multiply`` and ``add`` of constants; after a convolution the
multiply goes into the convolution's weights, and the adds that follow merge into
one bias, which fusion then takes as the convolution's epilogue. Three local rules,
applied until none applies, each only where the value it removes has no other
reader and is no model output:

- ``multiply(conv2d(x, W), S)`` -> ``conv2d(x, W * S)``, S one factor per output channel
  (output channel o reads only W[o], whatever the groups)
- ``multiply(add(y, B), S)`` -> ``add(multiply(y, S), B * S)``, B and S constants
- ``add(add(y, B1), B2)`` -> ``add(y, B1 + B2)``, B1 and B2 constants
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator

import numpy as np

from compiler.graph.ir import Graph, Node, TensorType

Rule = Callable[[Graph, Iterator[str]], bool]


def fold_scale_into_conv(graph: Graph) -> Graph:
    """``graph`` with batch-norm scales in the convolutions' weights (see above)."""
    return rewrite_until_done(graph, _apply_one_rule, "folded")


def rewrite_until_done(graph: Graph, apply_one_rule: Rule, prefix: str) -> Graph:
    """A copy of ``graph`` rewritten by ``apply_one_rule`` (which edits the graph in
    place, naming new values from the iterator it gets, ``<prefix>_0``, ...) until it
    returns False, without the constants nothing reads any more."""
    rewritten = dataclasses.replace(
        graph,
        inputs=dict(graph.inputs),
        constants=dict(graph.constants),
        nodes=list(graph.nodes),
        types=dict(graph.types),
    )
    names = (f"{prefix}_{k}" for k in itertools.count())
    while apply_one_rule(rewritten, names):
        pass
    drop_unused_constants(rewritten)
    return rewritten


def _apply_one_rule(graph: Graph, names: Iterator[str]) -> bool:
    producer = graph.producer()
    consumers = graph.consumers()
    for node in graph.nodes:
        if node.op not in ("multiply", "add") or len(node.inputs) != 2:
            continue
        value, constant = node.inputs
        if constant not in graph.constants:
            value, constant = constant, value
        if constant not in graph.constants or value not in producer:
            continue
        if value in graph.outputs or len(consumers.get(value, [])) != 1:
            continue
        before = producer[value]
        rule = _RULES.get((node.op, before.op))
        if rule is not None and rule(graph, before, node, constant, names):
            return True
    return False


def _scale_conv(graph: Graph, conv: Node, multiply: Node, scale: str, names: Iterator[str]) -> bool:
    weights = graph.constants.get(conv.inputs[1])
    if weights is None:
        return False
    per_channel = _per_channel(graph.constants[scale], weights.shape[0])
    if per_channel is None:
        return False
    name = next(names)
    graph.constants[name] = (weights * per_channel[:, None, None, None]).astype(weights.dtype)
    graph.types[name] = graph.types[conv.inputs[1]]
    scaled = dataclasses.replace(conv, inputs=(conv.inputs[0], name), output=multiply.output)
    _replace(graph, drop=multiply, old=conv, new=scaled)
    return True


def _distribute_scale(
    graph: Graph, add: Node, multiply: Node, scale: str, names: Iterator[str]
) -> bool:
    value, bias = add.inputs
    if bias not in graph.constants:
        value, bias = bias, value
    if bias not in graph.constants:
        return False
    product = graph.constants[bias] * graph.constants[scale]
    shape = graph.types[value].shape
    if product.shape != graph.constants[bias].shape:
        return False
    if np.broadcast_shapes(shape, graph.constants[scale].shape) != shape:
        return False
    name = next(names)
    graph.constants[name] = product.astype(graph.constants[bias].dtype)
    graph.types[name] = graph.types[bias]
    scaled = dataclasses.replace(multiply, inputs=(value, scale), output=add.output)
    shifted = dataclasses.replace(add, inputs=(add.output, name), output=multiply.output)
    index = graph.nodes.index(add)
    graph.nodes[index : index + 1] = [scaled]
    graph.nodes[graph.nodes.index(multiply)] = shifted
    graph.types[add.output] = graph.types[value]
    return True


def _merge_adds(graph: Graph, first: Node, second: Node, bias: str, names: Iterator[str]) -> bool:
    value, first_bias = first.inputs
    if first_bias not in graph.constants:
        value, first_bias = first_bias, value
    if first_bias not in graph.constants:
        return False
    total = graph.constants[first_bias] + graph.constants[bias]
    if total.shape != graph.constants[first_bias].shape:
        return False
    name = next(names)
    graph.constants[name] = total.astype(graph.constants[first_bias].dtype)
    graph.types[name] = graph.types[first_bias]
    merged = dataclasses.replace(first, inputs=(value, name), output=second.output)
    _replace(graph, drop=second, old=first, new=merged)
    return True


_RULES = {
    ("multiply", "conv2d"): _scale_conv,
    ("multiply", "add"): _distribute_scale,
    ("add", "add"): _merge_adds,
}


def _per_channel(scale: np.ndarray, channels: int) -> np.ndarray | None:
    """``scale`` as one factor per output channel of an NCHW result, or None when it
    scales along another axis too."""
    if scale.size == 1:
        return np.full(channels, scale.reshape(()), dtype=scale.dtype)
    squeezed = scale.reshape(scale.shape[-3:]) if scale.ndim == 4 and scale.shape[0] == 1 else scale
    if squeezed.ndim == 3 and squeezed.shape == (channels, 1, 1):
        return squeezed.reshape(channels)
    return None


def _replace(graph: Graph, *, drop: Node, old: Node, new: Node) -> None:
    """Put ``new`` where ``drop`` was (it makes ``drop``'s output, which later nodes
    read), and remove ``old``, whose output nothing reads any more."""
    graph.nodes[graph.nodes.index(drop)] = new
    graph.nodes.remove(old)
    del graph.types[old.output]


Fit = Callable[[str, list[Node]], str | None]


def sink_below(graph: Graph, moving: Node, node: Node, fit: Fit, names: Iterator[str]) -> bool:
    """Compute ``node`` on the input of ``moving`` (a layout node: a reshape, a layout
    transform) and apply ``moving`` after it instead, when every other operand of
    ``node`` has a stand-in: ``fit(value, added)`` names it (appending any node it
    needs to ``added``) or returns None, and then nothing changes. ``moving`` stays
    while other nodes read it."""
    (source,) = moving.inputs
    if graph.types[node.output].shape != graph.types[moving.output].shape:
        return False  # the node broadcasts the moved value itself to more elements
    added: list[Node] = []
    inputs = []
    for value in node.inputs:
        fitted = source if value == moving.output else fit(value, added)
        if fitted is None:
            return False
        inputs.append(fitted)
    computed = next(names)
    graph.types[computed] = TensorType(graph.types[source].shape, graph.types[node.output].dtype)
    moved = dataclasses.replace(node, inputs=tuple(inputs), output=computed)
    after = dataclasses.replace(moving, inputs=(computed,), output=node.output, name=node.name)
    at = graph.nodes.index(node)
    graph.nodes[at : at + 1] = [*added, moved, after]
    if not any(moving.output in n.inputs for n in graph.nodes):
        graph.nodes.remove(moving)
        del graph.types[moving.output]
    return True


def bypass(graph: Graph, node: Node, source: str) -> None:
    """Remove ``node``, whose output holds what ``source`` holds: its readers read
    ``source`` instead."""
    graph.nodes.remove(node)
    graph.nodes[:] = [
        dataclasses.replace(n, inputs=tuple(source if v == node.output else v for v in n.inputs))
        for n in graph.nodes
    ]
    del graph.types[node.output]


def drop_unused_constants(graph: Graph) -> None:
    """Remove the constants no node reads and no output returns."""
    read = {value for node in graph.nodes for value in node.inputs} | set(graph.outputs)
    for name in [name for name in graph.constants if name not in read]:
        del graph.constants[name]
        del graph.types[name]
