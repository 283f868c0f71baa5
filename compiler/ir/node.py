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
T = TypeVar("T")


# The text forms of expressions, statements, functions and modules, by kind ("expr",
# "stmt", "func", "module"). The printer (``compiler.ir.printer``) installs them when
# the package loads: it reads the analyses, which import the nodes, so the nodes reach
# it through this table instead of importing it.
TEXT_FORMS: dict[str, Callable[..., str]] = {}


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
    return list(_children(node))


def _children(node: Node) -> tuple[Node, ...]:
    """The direct child nodes, kept on the node: nodes are frozen, and schedules walk
    the same subtrees over and over (a replayed candidate shares most of its tree with
    the states before it)."""
    found = node.__dict__.get(_CHILDREN)
    if found is not None:
        return cast(tuple[Node, ...], found)
    out: list[Node] = []
    if not node.is_leaf:
        for name in _child_fields(node):
            value = getattr(node, name)
            if isinstance(value, Node):
                out.append(value)
            elif isinstance(value, tuple):
                out.extend(v for v in value if isinstance(v, Node))
    found = tuple(out)
    node.__dict__[_CHILDREN] = found
    return found


_CHILDREN = "_tensortune_children"


def memoized(node: Node, key: str, compute: Callable[[], T]) -> T:
    """``compute()``, kept on ``node`` under ``key``: a node never changes, so neither
    does anything computed from its subtree alone."""
    cache = node.__dict__
    if key in cache:
        return cast(T, cache[key])
    value = compute()
    cache[key] = value
    return value


def replace_child(node: N, old: Node, new: Node) -> N:
    """``node`` with its direct child ``old`` (by identity) replaced by ``new``."""
    changes: dict[str, Any] = {}
    for name in _child_fields(node):
        value = getattr(node, name)
        if value is old:
            changes[name] = new
        elif isinstance(value, tuple) and any(v is old for v in value):
            changes[name] = tuple(new if v is old else v for v in value)
    if not changes:
        raise LookupError(f"{type(old).__name__} is not a child of this {type(node).__name__}")
    return dataclasses.replace(node, **changes)


def visit(node: Node, fn: Callable[[Node], bool | None]) -> None:
    """Call ``fn`` on every node in pre-order; a ``False`` return skips that subtree."""
    stack = [node]
    pop = stack.pop
    extend = stack.extend
    while stack:
        current = pop()
        if fn(current) is False:
            continue
        extend(reversed(_children(current)))


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
