"""Workloads as documents, and the key that names a workload in caches and databases.

A workload is an unscheduled PrimFunc. It travels as the JSON of
``compiler.ir.serialize`` and is named by ``workload_key``: the sha256 of its
canonical string. The canonical string already numbers variables and buffers
instead of naming them; the key also leaves out the function's
``global_symbol``, since what a kernel is called when it is built does not
change what it computes. So two users who describe the same computation get the
same key, and an operator spec (``{"op": "matmul", "args": {...}}``) gets the
key of the PrimFunc that calling the operator in Python gives.

Block names, dtypes, constants and every other attribute still count: a trace
finds its blocks by name, so a renamed block is a different workload for the
tuner.

Documents come from users, the HTTP API and the database, so reading one
reports every problem as ``WorkloadError`` (the message starts with the JSON path
of the bad field) and nothing is evaluated.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from compiler.ir.function import PrimFunc
from compiler.ir.node import memoized
from compiler.ir.serialize import MAX_CHARS, IRFormatError, from_json, to_json_string
from compiler.ir.stmt import BlockRealize
from compiler.workload.spec import MAX_ELEMENTS, WorkloadError

# Attributes that name a function rather than describe its computation.
NAMING_ATTRS = ("global_symbol",)


def workload_key(func: PrimFunc) -> str:
    """The sha256 hex digest of ``func``'s canonical JSON, without naming attributes;
    kept on ``func``, which never changes (a model's tuning asks for the keys of the
    same workloads every round)."""
    _check_func(func, "workload_key")
    return memoized(func, "_tensortune_workload_key", lambda: _digest(func))


def _digest(func: PrimFunc) -> str:
    attrs = {k: v for k, v in func.attrs.items() if k not in NAMING_ATTRS}
    text = _to_text(dataclasses.replace(func, attrs=attrs), canonical_names=True)
    return hashlib.sha256(text.encode()).hexdigest()


def workload_to_json(func: PrimFunc) -> str:
    """The JSON text that carries ``func`` across processes: sorted keys, no whitespace,
    the variables' and buffers' own names kept so that people can read it."""
    _check_func(func, "workload_to_json")
    return _to_text(func, canonical_names=False)


def workload_from_json(document: str | bytes | Mapping[str, Any]) -> PrimFunc:
    """The PrimFunc a ``workload_to_json`` document (text or parsed) describes.

    Raises WorkloadError naming the JSON path for anything that is not such a
    document: malformed JSON, another format, a wrong field, nesting deeper or a
    document larger than ``compiler.ir.serialize`` allows, an integer constant its
    dtype cannot hold, a dimension that is not positive, a tensor of more than
    2**31 elements, or a body that is not the root block a workload starts from.
    """
    if isinstance(document, (str, bytes)):
        document = _parse(document)
    if not isinstance(document, Mapping):
        raise WorkloadError(
            f"$: a workload document is a JSON object, got {type(document).__name__}"
        )
    try:
        func = from_json(document)
    except IRFormatError as err:
        raise WorkloadError(str(err)) from None
    _check_constants(document)
    if not isinstance(func.body, BlockRealize):
        raise WorkloadError(
            f"$.body: a workload's body is the root block (a BlockRealize), got "
            f"{type(func.body).__name__}; serialize a PrimFunc from te.create_prim_func"
        )
    return func


def _parse(text: str | bytes) -> Any:
    if len(text) > MAX_CHARS:
        raise WorkloadError(f"$: the document has {len(text)} characters, over {MAX_CHARS}")
    try:
        return json.loads(text)
    except ValueError as err:  # JSONDecodeError, bad UTF-8, an integer with too many digits
        raise WorkloadError(f"$: not JSON: {err}") from None
    except RecursionError:
        raise WorkloadError("$: the document is nested too deeply to parse") from None


def _check_constants(document: Mapping[str, Any]) -> None:
    """Integer constants fit their dtype, and constant dimensions are positive with at
    most MAX_ELEMENTS elements per buffer. ``from_json`` accepted the document, so
    its nesting is bounded and the buffers' fields are well formed; the walk below
    also meets fields the reader ignores, so it trusts nothing there."""
    stack: list[tuple[Any, str]] = [(document, "$")]
    while stack:
        value, path = stack.pop()
        items = value.get("items") if isinstance(value, Mapping) else None
        if isinstance(items, Mapping) and value.get("node") == "dict":
            # an annotation's own keys, not node fields (a malformed one is walked below)
            stack.extend((v, f"{path}.{k}") for k, v in items.items())
        elif isinstance(value, Mapping):
            if value.get("node") == "IntImm" and value.get("dtype") in _INT_RANGES:
                _check_int_range(value.get("value"), value["dtype"], f"{path}.value")
            stack.extend((v, f"{path}.{k}") for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{k}]") for k, v in enumerate(value))
    for k, buffer in enumerate(document["buffers"]):
        elements = 1
        for d, dim in enumerate(buffer["shape"]):
            if dim["node"] == "IntImm" and dim["value"] < 1:
                raise WorkloadError(
                    f"$.buffers[{k}].shape[{d}]: dimension {dim['value']} of buffer "
                    f"{buffer['name']!r} must be positive"
                )
            elements *= dim["value"] if dim["node"] == "IntImm" else 1
        if elements > MAX_ELEMENTS:
            raise WorkloadError(
                f"$.buffers[{k}].shape: buffer {buffer['name']!r} has {elements} elements, "
                "more than the limit 2**31"
            )


_INT_RANGES = {
    "bool": (0, 1),
    "uint8": (0, 2**8 - 1),
    **{f"int{bits}": (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) for bits in (8, 16, 32, 64)},
}


def _check_int_range(value: Any, dtype: str, path: str) -> None:
    """``value`` fits ``dtype``; anything but an int was already refused by the reader,
    or sits in a field it ignores."""
    low, high = _INT_RANGES[dtype]
    if _is_int(value) and not low <= value <= high:
        raise WorkloadError(f"{path}: {value} does not fit {dtype} ({low} to {high})")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_func(func: Any, caller: str) -> None:
    if not isinstance(func, PrimFunc):
        raise WorkloadError(
            f"{caller} takes a PrimFunc, got {type(func).__name__}; turn an operator spec "
            "into one with compiler.workload.spec.workload_from_spec"
        )


def _to_text(func: PrimFunc, canonical_names: bool) -> str:
    try:
        return to_json_string(func, canonical_names=canonical_names)
    except IRFormatError as err:
        raise WorkloadError(str(err)) from None
