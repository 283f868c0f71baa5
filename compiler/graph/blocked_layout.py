"""Convolutions in the blocked layout NCHW[x]c from the first to the last, with
layout transforms only where the layout really changes (Relay's AlterOpLayout for
x86 ``conv2d_NCHWc``).

``block_convolutions`` rewrites the graph by these local rules until none applies:

- a ``conv2d`` (one group, output channels that split into blocks) becomes
  ``to_nchw(conv2d_nchwc(to_blocked(x), W'))``, its weight ``W`` converted once, here,
  to (O/b, C/c, KH, KW, c, b). Each convolution takes its own output block ``b``, the
  widest of the given block and its halves that its output channels split into
  (``conv_block``: MobileNetV2's 144 channels run in blocks of 16, its 24 in blocks
  of 8). The input block ``c`` is the block ``x`` was made in, where ``x`` is a
  blocked value's ``to_nchw`` (so the transforms cancel), else ``b`` where the input
  channels split into it, else all of them when fewer (an image's 3 channels: the
  first convolution runs blocked too), else their largest common divisor with ``b``;
- a depthwise ``conv2d`` (multiplier 1, channels that split into blocks) becomes
  ``to_nchw(depthwise_conv2d_nchwc(to_blocked(x), W'))``, ``W'`` (C/b, KH, KW, b), in
  the block ``x`` was made in where the channels split into it, else its own;
- ``to_blocked(to_nchw(z))`` reads ``z`` itself;
- ``f(to_nchw(y), ...)`` becomes ``to_nchw(f(y, ...))`` for an elementwise or
  broadcast ``f`` whose other operands fit the blocked layout: one element, a
  per-channel constant (a bias, converted here), or a value of the same shape (then
  read through ``to_blocked``, which the rule before cancels where it was blocked);
- a pooling (max, average, global average) of ``to_nchw(y)`` pools ``y`` in the
  blocked layout, its channel block passing through, and is transformed after;
- a transform that nothing reads goes.

So a ResNet's bias adds, ReLUs, residual adds and poolings stay blocked between its
convolutions; a transform is left only before a node that needs NCHW (a flatten, a
depthwise convolution of another multiplier), and there the node reads it in place
(``compiler.graph.fuse``): no kernel copies the layout.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from functools import partial

import numpy as np

from compiler.graph.ir import Graph, Node, TensorType
from compiler.graph.ops import OPS, Pattern
from compiler.graph.passes import bypass, rewrite_until_done, sink_below

# The widest channel block a model's convolutions run in unless told otherwise: two
# AVX2 vectors or one AVX-512 vector of float32, the width of the default schedule's
# register tile (``compiler.schedule.default``); narrower (``conv_block``) where a
# convolution's channels do not split into it.
DEFAULT_CONV_BLOCK = 16
# The narrowest block ``conv_block`` picks: one SSE vector of float32.
NARROWEST_BLOCK = 4
TRANSFORM = "layout_transform"
BLOCKED = "NCHWc"
PLAIN = "NCHW"
MOVABLE = (Pattern.ELEMWISE, Pattern.BROADCAST)
POOLS = ("max_pool2d", "avg_pool2d", "global_avg_pool2d")


def conv_block(channels: int, widest: int) -> int | None:
    """The block of a convolution's ``channels``: the widest of ``widest`` and its
    halves, down to ``NARROWEST_BLOCK``, that they split into; None when none does (a
    convolution of 6 channels stays NCHW). A model whose channel counts differ in
    what they split into (MobileNetV2's 24 among multiples of 16) runs each
    convolution in its own: one block of 8 for the whole model made its pointwise
    convolutions half as fast on AVX-512."""
    block = widest
    while block >= NARROWEST_BLOCK:
        if channels % block == 0:
            return block
        block //= 2
    return None


def block_convolutions(graph: Graph, widest: int) -> Graph:
    """``graph`` with each convolution in NCHW[b]c, ``b`` at most ``widest`` (see the
    module docstring)."""
    return rewrite_until_done(graph, partial(_apply_one_rule, widest=widest), "blocked")


def _apply_one_rule(graph: Graph, names: Iterator[str], *, widest: int) -> bool:
    producer = graph.producer()
    consumers = graph.consumers()
    for node in graph.nodes:
        if node.op == "conv2d" and _blockable(graph, node, widest):
            _block_convolution(graph, node, widest, producer, names)
            return True
        if node.op == "conv2d" and _depthwise_blockable(graph, node, widest):
            _block_depthwise(graph, node, widest, producer, names)
            return True
        if node.op in POOLS:
            unblock = producer.get(node.inputs[0])
            if _only_reader_of_unblock(graph, unblock, consumers):
                assert unblock is not None
                _pool_blocked(graph, unblock, node, names)
                return True
            continue
        if node.op != TRANSFORM and OPS[node.op].pattern not in MOVABLE:
            continue
        if node.op == TRANSFORM and node.output not in graph.outputs:
            if not consumers.get(node.output):
                graph.nodes.remove(node)
                del graph.types[node.output]
                return True
            undone = _undone(graph, node, producer)
            if undone is not None:
                bypass(graph, node, undone)
                return True
            continue
        for value in node.inputs:
            unblock = producer.get(value)
            if not _only_reader_of_unblock(graph, unblock, consumers):
                continue
            assert unblock is not None
            if _sink(graph, unblock, node, names):
                return True
    return False


def _only_reader_of_unblock(
    graph: Graph, unblock: Node | None, consumers: dict[str, list[Node]]
) -> bool:
    """Whether ``unblock`` is a transform to NCHW that one node reads, and no graph
    output: that node may then read the blocked value instead."""
    return (
        unblock is not None
        and unblock.op == TRANSFORM
        and unblock.attrs["to"] == PLAIN
        and unblock.output not in graph.outputs
        and len(consumers.get(unblock.output, [])) == 1
    )


def _pool_blocked(graph: Graph, unblock: Node, pool: Node, names: Iterator[str]) -> None:
    """``pool(to_nchw(y))`` as ``to_nchw(pool(y))``: a pooling is per channel, so the
    channel block passes through it."""
    block = graph.types[unblock.inputs[0]].shape[-1]
    n, channels, height, width = graph.types[pool.output].shape
    dtype = graph.types[pool.output].dtype
    pooled = next(names)
    graph.types[pooled] = TensorType((n, channels // block, height, width, block), dtype)
    moved = dataclasses.replace(pool, inputs=unblock.inputs, output=pooled)
    after = dataclasses.replace(unblock, inputs=(pooled,), output=pool.output, name=pool.name)
    at = graph.nodes.index(pool)
    graph.nodes[at : at + 1] = [moved, after]
    graph.nodes.remove(unblock)
    del graph.types[unblock.output]


def _blockable(graph: Graph, conv: Node, widest: int) -> bool:
    data, weights = conv.inputs
    shape = graph.types[data].shape
    kernel = graph.constants.get(weights)
    return (
        conv.attrs.get("groups", 1) == 1
        and len(shape) == 4
        and kernel is not None
        and kernel.ndim == 4
        and conv_block(kernel.shape[0], widest) is not None
    )


def input_block(channels: int, block: int) -> int:
    """The block of a blocked convolution's input channels (see the module docstring)."""
    if channels % block == 0:
        return block
    return channels if channels < block else math.gcd(channels, block)


def _depthwise_blockable(graph: Graph, conv: Node, widest: int) -> bool:
    """A depthwise convolution of multiplier 1 whose channels split into blocks."""
    data, weights = conv.inputs
    shape = graph.types[data].shape
    kernel = graph.constants.get(weights)
    return (
        len(shape) == 4
        and kernel is not None
        and kernel.ndim == 4
        and conv.attrs.get("groups", 1) == shape[1] == kernel.shape[0]
        and kernel.shape[1] == 1
        and conv_block(shape[1], widest) is not None
    )


def _made_in_block(graph: Graph, value: str, producer: dict[str, Node]) -> int | None:
    """The block of the blocked value that ``value`` (C channels) is the ``to_nchw``
    of, if it is and C splits into it: reading ``value`` in that block, the two
    transforms cancel."""
    made_by = producer.get(value)
    if made_by is None or made_by.op != TRANSFORM or made_by.attrs["to"] != PLAIN:
        return None
    block = graph.types[made_by.inputs[0]].shape[-1]
    return block if graph.types[value].shape[1] % block == 0 else None


def _block_convolution(
    graph: Graph, conv: Node, widest: int, producer: dict[str, Node], names: Iterator[str]
) -> None:
    """``conv`` as ``to_nchw(conv2d_nchwc(to_blocked(x), W'))``, ``W'`` made here."""
    channels = graph.types[conv.inputs[0]].shape[1]
    kernel = graph.constants[conv.inputs[1]]
    out, _, kh, kw = kernel.shape
    block = conv_block(out, widest)
    assert block is not None, "_blockable checked the output channels"
    inner = _made_in_block(graph, conv.inputs[0], producer) or input_block(channels, block)
    blocked = kernel.reshape(out // block, block, channels // inner, inner, kh, kw)
    _replace_blocked(
        graph, conv, "conv2d_nchwc", inner, blocked.transpose(0, 2, 4, 5, 3, 1), block, names
    )


def _block_depthwise(
    graph: Graph, conv: Node, widest: int, producer: dict[str, Node], names: Iterator[str]
) -> None:
    """``conv`` as ``to_nchw(depthwise_conv2d_nchwc(to_blocked(x), W'))``."""
    kernel = graph.constants[conv.inputs[1]]
    channels, _, kh, kw = kernel.shape
    block = _made_in_block(graph, conv.inputs[0], producer) or conv_block(channels, widest)
    assert block is not None, "_depthwise_blockable checked the channels"
    blocked = kernel.reshape(channels // block, block, kh, kw).transpose(0, 2, 3, 1)
    _replace_blocked(graph, conv, "depthwise_conv2d_nchwc", block, blocked, block, names)


def _replace_blocked(
    graph: Graph,
    conv: Node,
    op: str,
    inner: int,
    kernel: np.ndarray,
    block: int,
    names: Iterator[str],
) -> None:
    """Replace ``conv`` by ``to_nchw(op(to_blocked(x), kernel))``, its input in blocks
    of ``inner`` channels, its output in blocks of ``block``."""
    data = conv.inputs[0]
    n, channels, height, width = graph.types[data].shape
    dtype = graph.types[conv.output].dtype
    _, out, out_height, out_width = graph.types[conv.output].shape
    blocked_data, blocked_kernel, blocked_out = next(names), next(names), next(names)
    graph.types[blocked_data] = TensorType((n, channels // inner, height, width, inner), dtype)
    graph.constants[blocked_kernel] = np.ascontiguousarray(kernel)
    graph.types[blocked_kernel] = TensorType(kernel.shape, dtype)
    graph.types[blocked_out] = TensorType((n, out // block, out_height, out_width, block), dtype)
    window = {k: v for k, v in conv.attrs.items() if k in ("stride", "padding", "dilation")}
    at = graph.nodes.index(conv)
    graph.nodes[at : at + 1] = [
        Node(TRANSFORM, (data,), blocked_data, {"to": BLOCKED, "block": inner}, conv.name),
        Node(op, (blocked_data, blocked_kernel), blocked_out, window, conv.name),
        Node(TRANSFORM, (blocked_out,), conv.output, {"to": PLAIN}, conv.name),
    ]


def _undone(graph: Graph, transform: Node, producer: dict[str, Node]) -> str | None:
    """What ``transform`` undoes: ``z`` for ``to_blocked(to_nchw(z))`` (same block)."""
    if transform.attrs["to"] != BLOCKED:
        return None
    before = producer.get(transform.inputs[0])
    if before is None or before.op != TRANSFORM or before.attrs["to"] != PLAIN:
        return None
    source = before.inputs[0]
    return source if graph.types[source].shape[-1] == transform.attrs["block"] else None


def _sink(graph: Graph, unblock: Node, node: Node, names: Iterator[str]) -> bool:
    """``node`` computed blocked and transformed after, when its operands fit."""
    blocked = graph.types[unblock.inputs[0]].shape
    plain = graph.types[unblock.output].shape
    fit = partial(_fit, graph, plain=plain, blocked=blocked, names=names)
    return sink_below(graph, unblock, node, fit, names)


def _fit(
    graph: Graph,
    value: str,
    added: list[Node],
    *,
    plain: tuple[int, ...],
    blocked: tuple[int, ...],
    names: Iterator[str],
) -> str | None:
    """The operand that plays ``value``'s part in the blocked layout, or None."""
    kind = graph.types[value]
    block = blocked[-1]
    if kind.size == 1:
        return value
    if kind.shape == plain:
        name = next(names)
        graph.types[name] = TensorType(blocked, kind.dtype)
        added.append(Node(TRANSFORM, (value,), name, {"to": BLOCKED, "block": block}))
        return name
    constant = graph.constants.get(value)
    channels = plain[1]
    if constant is None or constant.ndim > 4:
        return None
    padded = (1,) * (4 - constant.ndim) + constant.shape
    if padded != (1, channels, 1, 1):
        return None
    name = next(names)
    graph.constants[name] = constant.reshape(1, channels // block, 1, 1, block).copy()
    graph.types[name] = TensorType(graph.constants[name].shape, kind.dtype)
    return name
