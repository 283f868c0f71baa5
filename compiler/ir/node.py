"""The base of every IR node and the two generic traversals over node trees.

IR nodes are frozen dataclasses. A node's children are its fields that hold nodes
or tuples of nodes; ``visit`` walks them and ``transform`` rebuilds a tree bottom
up, sharing every subtree that did not change. Variables and buffers are leaves:
they are referred to by identity, never rebuilt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, cast

N = TypeVar("N", bound="Node")


class Node:
    """Base of IR nodes; equality and hashing are by identity (see ``structural``)."""

    __hash__ = object.__hash__
    is_leaf = False
    # Every concrete node is a dataclass; declaring so lets ``dataclasses`` accept nodes.
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]


def _child_fields(node: Node) -> list[str]:
    cache = _FIELD_CACHE.get(type(node))
    if cache is None:
        cache = [f.name for f in dataclasses.fields(node)]
        _FIELD_CACHE[type(node)] = cache
    return cache


_FIELD_CACHE: dict[type, list[str]] = {}


def children(node: Node) -> list[Node]:
    """The direct child nodes of ``node``, in field order."""
    if node.is_leaf:
        return []
    out: list[Node] = []
    for name in _child_fields(node):
        value = getattr(node, name)
        if isinstance(value, Node):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(v for v in value if isinstance(v, Node))
    return out


def visit(node: Node, fn: Callable[[Node], bool | None]) -> None:
    """Call ``fn`` on every node in pre-order; a ``False`` return skips that subtree."""
    stack = [node]
    while stack:
        current = stack.pop()
        if fn(current) is False:
            continue
        stack.extend(reversed(children(current)))


def transform(node: N, fn: Callable[[Node], Node | None]) -> N:
    """Rebuild ``node`` bottom-up: ``fn`` gets each node after its children were rebuilt
    and returns a replacement, or ``None`` to keep it."""
    rebuilt = _rebuild_children(node, fn)
    replaced = fn(rebuilt)
    # ``fn`` replaces a node only with one that may stand where it stood.
    return rebuilt if replaced is None else cast(N, replaced)


def transform_pre(node: N, fn: Callable[[Node], Node | None]) -> N:
    """Like ``transform`` but top-down: where ``fn`` returns a node, that node is kept
    as it is and its subtree is not visited."""
    replaced = fn(node)
    if replaced is not None:
        return cast(N, replaced)
    return _rebuild_children(node, lambda n: None, pre=fn)


def _rebuild_children(node: N, fn: Callable[[Node], Node | None], pre: Any = None) -> N:
    if node.is_leaf:
        return node
    changes: dict[str, Any] = {}
    for name in _child_fields(node):
        value = getattr(node, name)
        if isinstance(value, Node):
            new = _descend(value, fn, pre)
            if new is not value:
                changes[name] = new
        elif isinstance(value, tuple) and any(isinstance(v, Node) for v in value):
            new_items = tuple(_descend(v, fn, pre) if isinstance(v, Node) else v for v in value)
            if any(a is not b for a, b in zip(new_items, value, strict=True)):
                changes[name] = new_items
    if not changes:
        return node
    return dataclasses.replace(node, **changes)


def _descend(value: Node, fn: Callable[[Node], Node | None], pre: Any) -> Node:
    if pre is not None:
        return transform_pre(value, pre)
    return transform(value, fn)
