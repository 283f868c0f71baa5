"""PrimFuncs as JSON documents, and back, without evaluating anything.

Workloads cross processes, hosts and the database as this JSON, and a workload's
key is a hash of its canonical string, so the format is explicit and strict:

    {"format": "tensortune.primfunc", "version": 1,
     "vars": [{"name": "n", "dtype": "int32"}, ...],
     "buffers": [{"name": "A", "shape": [<expr>, ...], "dtype": "float32",
                  "scope": "global"}, ...],
     "params": [0, 1, 2],
     "attrs": {...},
     "body": <stmt>}

Every variable and buffer is listed once, in order of first appearance (parameter
shapes first, then the body), and referred to by its index. Nodes are objects
whose ``"node"`` field names their kind; their other fields follow the IR classes.
Annotation and attribute values are JSON scalars, lists, ``{"node": "dict",
"items": {...}}``, non-finite floats as ``{"node": "float", "value": "inf"}``, or
expressions.

``to_json_string`` is canonical: sorted keys, no whitespace, and by default every
variable and buffer renamed by its index (``v0``, ``v1``, ... and ``b0``, ``b1``,
...). Names do not change what a function computes, so two users who write the
same computation with other names get the same string, and structurally equal
functions (see ``compiler.ir.structural``) always give the same string. Block
names, attributes (``global_symbol`` too) and annotations are kept: schedules
refer to blocks by name. ``to_json`` keeps the names unless asked not to.

``from_json`` rebuilds the function with the IR's own constructors. A malformed
document raises ``IRFormatError`` naming the JSON path of the bad field
(``$.body.block.body.seq[1].value``) and what was expected there.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from compiler.errors import CompilerError
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.function import PrimFunc
from compiler.ir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IterKind,
    IterVar,
    SeqStmt,
)

FORMAT = "tensortune.primfunc"
VERSION = 1
MAX_DEPTH = 256
MAX_NODES = 1_000_000
MAX_CHARS = 64 * 1024 * 1024

_BINARY = (E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv, E.FloorMod, E.Min, E.Max)
_COMPARE = (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.And, E.Or)

# Every node kind but Var (a reference into "vars"): its class and its fields, each
# with the kind of value it holds. Writer and reader both follow this table, and
# the classes are built with these fields as keyword arguments.
_NODES: dict[str, tuple[type, tuple[tuple[str, str], ...]]] = {
    "IntImm": (E.IntImm, (("value", "int"), ("dtype", "int_dtype"))),
    "FloatImm": (E.FloatImm, (("value", "float"), ("dtype", "float_dtype"))),
    **{
        cls.__name__: (cls, (("a", "expr"), ("b", "expr"), ("dtype", "dtype")))
        for cls in _BINARY + _COMPARE
    },
    "Not": (E.Not, (("a", "expr"), ("dtype", "dtype"))),
    "Select": (
        E.Select,
        (
            ("condition", "expr"),
            ("true_value", "expr"),
            ("false_value", "expr"),
            ("dtype", "dtype"),
        ),
    ),
    "Cast": (E.Cast, (("dtype", "dtype"), ("value", "expr"))),
    "Call": (E.Call, (("op", "intrinsic"), ("args", "exprs"), ("dtype", "dtype"))),
    "BufferLoad": (E.BufferLoad, (("buffer", "buffer"), ("indices", "exprs"), ("dtype", "dtype"))),
    "Range": (E.Range, (("min", "expr"), ("extent", "expr"))),
    "IterVar": (IterVar, (("var", "var"), ("dom", "range"), ("kind", "iter_kind"))),
    "BufferStore": (BufferStore, (("buffer", "buffer"), ("value", "expr"), ("indices", "exprs"))),
    "For": (
        For,
        (
            ("loop_var", "var"),
            ("min", "expr"),
            ("extent", "expr"),
            ("kind", "for_kind"),
            ("thread_binding", "optional_str"),
            ("annotations", "annotations"),
            ("body", "stmt"),
        ),
    ),
    "SeqStmt": (SeqStmt, (("seq", "stmts"),)),
    "IfThenElse": (
        IfThenElse,
        (("condition", "expr"), ("then_case", "stmt"), ("else_case", "optional_stmt")),
    ),
    "Evaluate": (Evaluate, (("value", "expr"),)),
    "BlockRealize": (
        BlockRealize,
        (("iter_values", "exprs"), ("predicate", "expr"), ("block", "block")),
    ),
    "Block": (
        Block,
        (
            ("name", "str"),
            ("iter_vars", "iter_vars"),
            ("alloc_buffers", "buffers"),
            ("annotations", "annotations"),
            ("init", "optional_stmt"),
            ("body", "stmt"),
        ),
    ),
    "Allocate": (Allocate, (("buffer", "buffer"), ("body", "stmt"))),
}

_EXPRESSIONS = frozenset(
    ["Var", "IntImm", "FloatImm", "Not", "Select", "Cast", "Call", "BufferLoad"]
    + [cls.__name__ for cls in _BINARY + _COMPARE]
)
_STATEMENTS = frozenset(
    ["BufferStore", "For", "SeqStmt", "IfThenElse", "Evaluate", "BlockRealize", "Block", "Allocate"]
)
# Which node kinds a field kind accepts.
_ACCEPTS = {
    "expr": _EXPRESSIONS,
    "stmt": _STATEMENTS,
    "block": frozenset(["Block"]),
    "range": frozenset(["Range"]),
    "iter_var": frozenset(["IterVar"]),
}
_LISTS = {"exprs": "expr", "stmts": "stmt", "iter_vars": "iter_var"}


class IRFormatError(CompilerError, ValueError):
    """A JSON document that is not a valid PrimFunc (or a function that cannot be
    written as one); the message starts with the JSON path of the bad field."""


def to_json(func: PrimFunc, *, canonical_names: bool = False) -> dict[str, Any]:
    """The JSON document of ``func``; with ``canonical_names`` every variable and
    buffer is named by its index instead of its own name."""
    if not isinstance(func, PrimFunc):
        raise IRFormatError(f"$: to_json takes a PrimFunc, not {type(func).__name__}")
    return _Writer(canonical_names).function(func)


def to_json_string(func: PrimFunc, *, canonical_names: bool = True) -> str:
    """The canonical text of ``func``: sorted keys, no whitespace, names by index."""
    document = to_json(func, canonical_names=canonical_names)
    return json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False)


def from_json(document: Mapping[str, Any] | str) -> PrimFunc:
    """The PrimFunc a ``to_json`` document (or its string) describes."""
    if isinstance(document, (str, bytes)):
        document = _parse(document)
    try:
        return _Reader().function(document)
    except RecursionError:
        raise IRFormatError(f"$: nested too deeply (the limit is {MAX_DEPTH} levels)") from None


def _parse(text: str | bytes) -> Any:
    if len(text) > MAX_CHARS:
        raise IRFormatError(f"$: the document has {len(text)} characters, over {MAX_CHARS}")
    try:
        return json.loads(text)
    except ValueError as err:  # JSONDecodeError, or an integer with too many digits
        raise IRFormatError(f"$: not JSON: {err}") from None
    except RecursionError:
        raise IRFormatError("$: the document is nested too deeply to parse") from None


# writing ---------------------------------------------------------------------------


class _Writer:
    """Encodes one function; numbers variables and buffers as it meets them."""

    def __init__(self, canonical_names: bool) -> None:
        self.canonical = canonical_names
        self.vars: dict[int, int] = {}
        self.buffers: dict[int, int] = {}
        self.doc: dict[str, Any] = {"format": FORMAT, "version": VERSION, "vars": [], "buffers": []}
        self.alive: list[Any] = []  # keeps numbered objects alive, so ids stay unique

    def function(self, func: PrimFunc) -> dict[str, Any]:
        params = [self.buffer(p, f"$.params[{k}]") for k, p in enumerate(func.params)]
        self.doc["params"] = params
        self.doc["attrs"] = self.value(func.attrs, "$.attrs", 0)
        self.doc["body"] = self.node(func.body, "$.body", 0)
        return self.doc

    def var(self, var: E.Var) -> int:
        if id(var) not in self.vars:
            index = self.vars[id(var)] = len(self.vars)
            self.alive.append(var)
            name = f"v{index}" if self.canonical else var.name
            self.doc["vars"].append({"name": name, "dtype": var.dtype})
        return self.vars[id(var)]

    def buffer(self, buffer: Buffer, path: str) -> int:
        if id(buffer) not in self.buffers:
            shape = [self.node(d, f"{path}.shape[{k}]", 1) for k, d in enumerate(buffer.shape)]
            index = self.buffers[id(buffer)] = len(self.buffers)
            self.alive.append(buffer)
            name = f"b{index}" if self.canonical else buffer.name
            entry = {"name": name, "shape": shape, "dtype": buffer.dtype, "scope": buffer.scope}
            self.doc["buffers"].append(entry)
        return self.buffers[id(buffer)]

    def node(self, node: Any, path: str, depth: int) -> dict[str, Any]:
        if depth >= MAX_DEPTH:
            raise IRFormatError(f"{path}: the IR is nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, E.Var):
            return {"node": "Var", "var": self.var(node)}
        kind = type(node).__name__
        cls, fields = _NODES.get(kind, (None, ()))
        if type(node) is not cls:
            raise IRFormatError(f"{path}: {kind} is not a node this format can store")
        out: dict[str, Any] = {"node": kind}
        for name, field_kind in fields:
            out[name] = self.field(getattr(node, name), field_kind, f"{path}.{name}", depth + 1)
        return out

    def field(self, value: Any, kind: str, path: str, depth: int) -> Any:
        if kind in _LISTS:
            return [self.node(v, f"{path}[{k}]", depth) for k, v in enumerate(value)]
        if kind in _ACCEPTS:
            return self.node(value, path, depth)
        if kind == "optional_stmt":
            return None if value is None else self.node(value, path, depth)
        if kind == "var":
            return self.var(value)
        if kind == "buffer":
            return self.buffer(value, path)
        if kind == "buffers":
            return [self.buffer(b, f"{path}[{k}]") for k, b in enumerate(value)]
        if kind in ("for_kind", "iter_kind"):
            return value.value
        if kind == "annotations":
            return self.value(value, path, depth)
        if kind == "float":
            return _float_out(value)
        return value  # int, str, optional_str, intrinsic and dtypes

    def value(self, value: Any, path: str, depth: int) -> Any:
        """An attribute or annotation value."""
        if depth >= MAX_DEPTH:
            raise IRFormatError(f"{path}: the value is nested deeper than {MAX_DEPTH} levels")
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return _float_out(value)
        if isinstance(value, (list, tuple)):
            return [self.value(v, f"{path}[{k}]", depth + 1) for k, v in enumerate(value)]
        if isinstance(value, Mapping):
            items = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise IRFormatError(f"{path}: key {key!r} is not a string")
                items[key] = self.value(item, f"{path}.{key}", depth + 1)
            return {"node": "dict", "items": items}
        if isinstance(value, E.PrimExpr):
            return self.node(value, path, depth)
        raise IRFormatError(
            f"{path}: cannot store {type(value).__name__} {value!r}; attribute values are "
            "None, bool, int, float, str, lists, dicts with string keys or expressions"
        )


def _float_out(value: float) -> float | dict[str, str]:
    if math.isfinite(value):
        return value
    return {"node": "float", "value": repr(value)}


# reading ---------------------------------------------------------------------------


class _Reader:
    """Decodes one document, checking every field before it builds a node."""

    def __init__(self) -> None:
        self.vars: list[E.Var] = []
        self.buffers: list[Buffer] = []
        self.nodes = 0

    def function(self, doc: Any) -> PrimFunc:
        doc = _object(doc, "$")
        if doc.get("format") != FORMAT:
            raise IRFormatError(f"$.format: expected {FORMAT!r}, got {doc.get('format')!r}")
        if doc.get("version") != VERSION:
            raise IRFormatError(
                f"$.version: this reader knows version {VERSION}, got {doc.get('version')!r}"
            )
        for k, entry in enumerate(_list(_field(doc, "vars", "$"), "$.vars")):
            self.vars.append(self.var_entry(entry, f"$.vars[{k}]"))
        for k, entry in enumerate(_list(_field(doc, "buffers", "$"), "$.buffers")):
            self.buffers.append(self.buffer_entry(entry, f"$.buffers[{k}]"))
        raw_params = _list(_field(doc, "params", "$"), "$.params")
        params = tuple(self.buffer_ref(p, f"$.params[{k}]") for k, p in enumerate(raw_params))
        attrs = self.field(_field(doc, "attrs", "$"), "annotations", "$.attrs", 0)
        body = self.field(_field(doc, "body", "$"), "stmt", "$.body", 0)
        return PrimFunc(params, body, attrs)

    def var_entry(self, entry: Any, path: str) -> E.Var:
        obj = _object(entry, path)
        name = _str(_field(obj, "name", path), f"{path}.name")
        return E.Var(name, _dtype(_field(obj, "dtype", path), f"{path}.dtype", E.DTYPES))

    def buffer_entry(self, entry: Any, path: str) -> Buffer:
        obj = _object(entry, path)
        name = _str(_field(obj, "name", path), f"{path}.name")
        shape = self.field(_field(obj, "shape", path), "exprs", f"{path}.shape", 1)
        for k, dim in enumerate(shape):
            if not E.is_int(dim.dtype):
                raise IRFormatError(f"{path}.shape[{k}]: a dimension must be an integer")
        dtype = _dtype(_field(obj, "dtype", path), f"{path}.dtype", E.DTYPES)
        return Buffer(name, shape, dtype, _str(_field(obj, "scope", path), f"{path}.scope"))

    def buffer_ref(self, value: Any, path: str) -> Buffer:
        return _index(self.buffers, _int(value, path), path, "buffer")

    def node(self, value: Any, accepts: frozenset[str], path: str, depth: int) -> Any:
        if depth >= MAX_DEPTH:
            raise IRFormatError(f"{path}: nested deeper than {MAX_DEPTH} levels")
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise IRFormatError(f"{path}: the document has more than {MAX_NODES} nodes")
        obj = _object(value, path)
        kind = _str(_field(obj, "node", path), f"{path}.node")
        if kind not in accepts:
            what = {_EXPRESSIONS: "expression", _STATEMENTS: "statement"}.get(accepts, "node")
            raise IRFormatError(
                f"{path}.node: unknown {what} kind {kind!r}; expected one of "
                f"{', '.join(sorted(accepts))}"
            )
        if kind == "Var":
            where = f"{path}.var"
            return _index(self.vars, _int(_field(obj, "var", path), where), where, "variable")
        cls, fields = _NODES[kind]
        values = {
            name: self.field(_field(obj, name, path), field_kind, f"{path}.{name}", depth + 1)
            for name, field_kind in fields
        }
        _check(kind, values, path)
        return cls(**values)

    def field(self, value: Any, kind: str, path: str, depth: int) -> Any:
        if kind in _LISTS:
            accepts = _ACCEPTS[_LISTS[kind]]
            items = _list(value, path)
            return tuple(self.node(v, accepts, f"{path}[{k}]", depth) for k, v in enumerate(items))
        if kind in _ACCEPTS:
            return self.node(value, _ACCEPTS[kind], path, depth)
        if kind == "optional_stmt":
            return None if value is None else self.node(value, _STATEMENTS, path, depth)
        if kind == "var":
            return _index(self.vars, _int(value, path), path, "variable")
        if kind == "buffer":
            return self.buffer_ref(value, path)
        if kind == "buffers":
            return tuple(
                self.buffer_ref(b, f"{path}[{k}]") for k, b in enumerate(_list(value, path))
            )
        if kind == "annotations":
            result = self.value(value, path, depth)
            if not isinstance(result, dict):
                raise IRFormatError(f'{path}: expected {{"node": "dict", "items": {{...}}}}')
            return result
        return _SCALARS[kind](value, path)

    def value(self, value: Any, path: str, depth: int) -> Any:
        """An attribute or annotation value."""
        if depth >= MAX_DEPTH:
            raise IRFormatError(f"{path}: nested deeper than {MAX_DEPTH} levels")
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise IRFormatError(f"{path}: the document has more than {MAX_NODES} nodes")
        if value is None or isinstance(value, (bool, int, str, float)):
            return value
        if isinstance(value, list):
            return [self.value(v, f"{path}[{k}]", depth + 1) for k, v in enumerate(value)]
        obj = _object(value, path)
        if obj.get("node") == "dict":
            items = _object(_field(obj, "items", path), f"{path}.items")
            return {k: self.value(v, f"{path}.{k}", depth + 1) for k, v in items.items()}
        if obj.get("node") == "float":
            return _float(obj, path)
        return self.node(obj, _EXPRESSIONS, path, depth)


def _check(kind: str, values: dict[str, Any], path: str) -> None:
    """Consistency a node's constructor does not check."""
    if kind in ("BufferLoad", "BufferStore"):
        ndim = len(values["buffer"].shape)
        if len(values["indices"]) != ndim:
            raise IRFormatError(
                f"{path}.indices: buffer {values['buffer'].name!r} has {ndim} dimensions, "
                f"indexed with {len(values['indices'])}"
            )
    elif kind == "BlockRealize" and len(values["iter_values"]) != len(values["block"].iter_vars):
        raise IRFormatError(
            f"{path}.iter_values: {len(values['iter_values'])} values for the "
            f"{len(values['block'].iter_vars)} block variables of {values['block'].name!r}"
        )


# scalar fields ---------------------------------------------------------------------


def _field(obj: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in obj:
        raise IRFormatError(f"{path}: missing field {key!r}")
    return obj[key]


def _object(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise IRFormatError(f"{path}: expected an object, got {_json_type(value)}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise IRFormatError(f"{path}: expected a list, got {_json_type(value)}")
    return value


def _int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise IRFormatError(f"{path}: expected an integer, got {_json_type(value)}")
    return value


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise IRFormatError(f"{path}: expected a string, got {_json_type(value)}")
    return value


def _optional_str(value: Any, path: str) -> str | None:
    return None if value is None else _str(value, path)


def _float(value: Any, path: str) -> float:
    if isinstance(value, Mapping) and value.get("node") == "float":
        text = value.get("value")
        if text in ("inf", "-inf", "nan") and set(value) == {"node", "value"}:
            return float(text)
        raise IRFormatError(f'{path}.value: expected "inf", "-inf" or "nan", got {text!r}')
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise IRFormatError(f"{path}: expected a number, got {_json_type(value)}")
    try:
        return float(value)
    except OverflowError:
        raise IRFormatError(f"{path}: {value} is too large for a float") from None


def _dtype(value: Any, path: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise IRFormatError(
            f"{path}: unknown dtype {value!r}; expected one of {', '.join(allowed)}"
        )
    return value


def _choice(kind: Callable[[Any], Any], allowed: list[str]) -> Callable[[Any, str], Any]:
    def read(value: Any, path: str) -> Any:
        if value not in allowed:
            raise IRFormatError(f"{path}: unknown value {value!r}; expected one of {allowed}")
        return kind(value)

    return read


def _index(table: list[Any], index: int, path: str, what: str) -> Any:
    if not 0 <= index < len(table):
        raise IRFormatError(f"{path}: {what} {index} is not among the {len(table)} {what}s")
    return table[index]


_SCALARS: dict[str, Callable[[Any, str], Any]] = {
    "int": _int,
    "float": _float,
    "str": _str,
    "optional_str": _optional_str,
    "dtype": lambda v, p: _dtype(v, p, E.DTYPES),
    "int_dtype": lambda v, p: _dtype(v, p, (*E.INT_DTYPES, "bool")),
    "float_dtype": lambda v, p: _dtype(v, p, E.FLOAT_DTYPES),
    "intrinsic": _choice(str, list(E.MATH_INTRINSICS)),
    "for_kind": _choice(ForKind, [k.value for k in ForKind]),
    "iter_kind": _choice(IterKind, [k.value for k in IterKind]),
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, Mapping) else type(value).__name__
