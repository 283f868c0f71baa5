"""Structural equality and hashing: two IR trees are equal when they compute the same
thing the same way, whatever their variables and buffers are called.

Both functions walk a tree into one stream of tokens, so "equal" and "same hash"
cannot disagree. Variables and buffers a tree defines (loop variables, block
variables, allocated and parameter buffers) become their position of definition:
the same computation built twice compares equal although every ``Var`` differs.
Inside a PrimFunc the free variables (symbolic sizes) are numbered by first use;
elsewhere a free variable must be the very same object, unless
``map_free_vars=True``. Block names, loop kinds, annotations, dtypes and
constants all count.

The hash is stable across processes (sha256 of the token stream; no ``id`` and no
``hash()`` of strings), so it can key caches and databases.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from collections.abc import Iterator, Mapping
from typing import Any

from compiler.ir.buffer import Buffer
from compiler.ir.expr import Var
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.node import Node
from compiler.ir.stmt import Allocate, Block, For, IterVar

Token = tuple[Any, ...]

# Fields that define (rather than use) a variable or buffer, per node type.
_DEFINING_FIELDS: dict[type, frozenset[str]] = {
    For: frozenset({"loop_var"}),
    IterVar: frozenset({"var"}),
    Block: frozenset({"alloc_buffers"}),
    Allocate: frozenset({"buffer"}),
    PrimFunc: frozenset({"params"}),
}

# Field visiting orders that differ from declaration order: a definition must be
# seen before the uses it scopes (a block's buffers before its body, a loop's
# bounds before its variable).
_FIELD_ORDER: dict[type, tuple[str, ...]] = {
    For: ("min", "extent", "loop_var", "kind", "thread_binding", "annotations", "body"),
    IterVar: ("dom", "kind", "var"),
    Block: ("name", "iter_vars", "alloc_buffers", "annotations", "init", "body"),
}


def structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """Whether ``a`` and ``b`` (exprs, stmts, buffers, PrimFuncs or IRModules) are
    the same computation up to the naming of the variables and buffers they define.

    With ``map_free_vars`` the free variables and buffers of ``a`` and ``b`` may
    also differ, as long as they correspond one to one in order of first use.
    """
    left = _Tokens(map_free_vars=map_free_vars, for_hash=False).stream(a)
    right = _Tokens(map_free_vars=map_free_vars, for_hash=False).stream(b)
    sentinel = ("end",)
    for x, y in zip(_chain_end(left, sentinel), _chain_end(right, sentinel), strict=False):
        if x != y:
            return False
        if x is sentinel:
            return True
    return False


def structural_hash(node: Any, map_free_vars: bool = False) -> int:
    """A 64-bit hash, equal for structurally equal nodes and stable across processes."""
    digest = hashlib.sha256()
    for token in _Tokens(map_free_vars=map_free_vars, for_hash=True).stream(node):
        digest.update(repr(token).encode())
        digest.update(b"\x00")
    return int.from_bytes(digest.digest()[:8], "big")


def _chain_end(tokens: Iterator[Token], end: Token) -> Iterator[Token]:
    yield from tokens
    yield end


class _Define:
    """A work item: ``value`` (a Var, a Buffer or a tuple of them) is being defined."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _Emit:
    """A work item: a literal token."""

    __slots__ = ("token",)

    def __init__(self, token: Token) -> None:
        self.token = token


class _MapFree:
    """A work item: number free variables from here on (entering a PrimFunc) or go
    back to the caller's setting (leaving it)."""

    __slots__ = ("on",)

    def __init__(self, on: bool) -> None:
        self.on = on


class _Tokens:
    """Turns a tree into tokens, numbering definitions (and mapped free names).

    The walk uses an explicit stack, so deep expressions cannot overflow Python's
    recursion limit. ``for_hash`` decides how an unmapped free variable shows:
    by identity for equality, by name and dtype for the hash (identity implies
    both, so the two stay consistent).
    """

    def __init__(self, *, map_free_vars: bool, for_hash: bool) -> None:
        self.map_free = map_free_vars
        self.for_hash = for_hash
        self.vars: dict[int, int] = {}
        self.buffers: dict[int, int] = {}
        self.alive: list[Any] = []  # keeps numbered objects alive, so ids stay unique

    def stream(self, root: Any) -> Iterator[Token]:
        stack: list[Any] = [_Define(root) if isinstance(root, Buffer) else root]
        while stack:
            item = stack.pop()
            if isinstance(item, _Emit):
                yield item.token
            elif isinstance(item, _MapFree):
                self.map_free = item.on
            elif isinstance(item, _Define):
                yield from self._define(item.value, stack)
            else:
                yield from self._value(item, stack)

    # definitions and uses ----------------------------------------------------------

    def _define(self, value: Any, stack: list[Any]) -> Iterator[Token]:
        if isinstance(value, tuple):
            yield ("seq", len(value))
            stack.extend(_Define(v) for v in reversed(value))
        elif isinstance(value, Var):
            yield self._number_var(value)
        elif isinstance(value, Buffer):
            if id(value) in self.buffers:
                yield ("buffer", self.buffers[id(value)])
                return
            yield self._number_buffer(value)
            stack.extend(reversed(value.shape))
        else:
            stack.append(value)

    def _number_var(self, var: Var) -> Token:
        if id(var) in self.vars:
            return ("var", self.vars[id(var)], var.dtype)
        self.vars[id(var)] = len(self.vars)
        self.alive.append(var)
        return ("def_var", self.vars[id(var)], var.dtype)

    def _number_buffer(self, buffer: Buffer) -> Token:
        index = self.buffers.setdefault(id(buffer), len(self.buffers))
        self.alive.append(buffer)
        return ("def_buffer", index, buffer.dtype, buffer.scope, len(buffer.shape))

    def _use_var(self, var: Var) -> Token:
        if id(var) in self.vars:
            return ("var", self.vars[id(var)], var.dtype)
        if self.map_free:
            return self._number_var(var)
        if self.for_hash:
            return ("free_var", var.name, var.dtype)
        return ("free_var", id(var))

    def _use_buffer(self, buffer: Buffer, stack: list[Any]) -> Iterator[Token]:
        if id(buffer) in self.buffers:
            yield ("buffer", self.buffers[id(buffer)])
        elif self.map_free:
            yield from self._define(buffer, stack)
        elif self.for_hash:
            yield ("free_buffer", buffer.name, buffer.dtype, buffer.scope, len(buffer.shape))
        else:
            yield ("free_buffer", id(buffer))

    # values -------------------------------------------------------------------------

    def _value(self, value: Any, stack: list[Any]) -> Iterator[Token]:
        if isinstance(value, Var):
            yield self._use_var(value)
        elif isinstance(value, Buffer):
            yield from self._use_buffer(value, stack)
        elif isinstance(value, PrimFunc):
            yield ("node", "PrimFunc")
            stack.append(_MapFree(self.map_free))
            stack.extend(reversed(self._fields(value)))
            stack.append(_MapFree(True))
        elif isinstance(value, IRModule):
            yield ("module", len(value))
            for name in sorted(value, reverse=True):
                stack.append(value[name])
                stack.append(_Emit(("str", name)))
        elif isinstance(value, Node) and dataclasses.is_dataclass(value):
            yield ("node", type(value).__name__)
            stack.extend(reversed(self._fields(value)))
        elif isinstance(value, Node):
            yield from self._opaque(value)
        else:
            yield from self._plain(value, stack)

    def _fields(self, node: Node) -> list[Any]:
        """Work items for ``node``'s fields, in visiting order."""
        kind = type(node)
        names = _FIELD_ORDER.get(kind) or _declared_fields(kind)
        defining = _DEFINING_FIELDS.get(kind, frozenset())
        items: list[Any] = []
        for name in names:
            value = getattr(node, name)
            items.append(_Define(value) if name in defining else value)
        return items

    def _opaque(self, node: Node) -> Iterator[Token]:
        """Leaf nodes without fields (a te Tensor): the same object, or the same name."""
        name = getattr(node, "name", "")
        if self.for_hash:
            yield ("leaf", type(node).__name__, name)
        else:
            self.alive.append(node)
            yield ("leaf", type(node).__name__, id(node))

    def _plain(self, value: Any, stack: list[Any]) -> Iterator[Token]:
        if value is None or isinstance(value, (bool, int, str)):
            yield (type(value).__name__, value)
        elif isinstance(value, float):
            yield ("float", repr(value))
        elif isinstance(value, enum.Enum):
            yield ("enum", type(value).__name__, value.name)
        elif isinstance(value, (tuple, list)):
            yield ("seq", len(value))
            stack.extend(reversed(value))
        elif isinstance(value, Mapping):
            keys = sorted(value, key=str)
            yield ("map", len(keys))
            for key in reversed(keys):
                stack.append(value[key])
                stack.append(_Emit(("key", str(key))))
        else:
            yield from self._opaque_value(value)

    def _opaque_value(self, value: Any) -> Iterator[Token]:
        """Any other annotation value: equal when ``==``, hashed by its type alone."""
        if self.for_hash:
            yield ("opaque", type(value).__name__)
        else:
            yield ("opaque", type(value).__name__, _EqualBy(value))


def _declared_fields(kind: type) -> tuple[str, ...]:
    names = _DECLARED.get(kind)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(kind))
        _DECLARED[kind] = names
    return names


_DECLARED: dict[type, tuple[str, ...]] = {}


class _EqualBy:
    """Wraps a value so that tokens compare it with ``==`` (and never by identity)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _EqualBy) and bool(self.value == other.value)

    __hash__ = None  # type: ignore[assignment]
