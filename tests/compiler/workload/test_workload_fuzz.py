"""Fuzzing the two doors through which workloads enter: operator specs and PrimFunc
documents. Whatever arrives, the answer is a PrimFunc or a WorkloadError, never
another exception (which would be a bug, or a crash in a service)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from op_examples import EXAMPLES

from compiler.workload.key import workload_from_json, workload_to_json
from compiler.workload.spec import WorkloadError, known_ops, workload_from_spec

FUZZ = settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Values that tend to break checks: wrong types, boundaries, huge and negative numbers.
AWKWARD = st.sampled_from(
    [
        None,
        True,
        False,
        0,
        -1,
        1,
        2**20,
        2**20 + 1,
        2**31,
        2**63,
        -(2**63),
        10**400,
        0.5,
        -0.0,
        1e308,
        float("inf"),
        float("-inf"),
        float("nan"),
        "",
        "float32",
        "int32",
        "bool",
        "Var",
        "BufferLoad",
        "serial",
        "parallel",
        "dict",
        "float",
        "inf",
        "__import__('os')",
        [],
        {},
        [1],
        [-1, 0],
        {"node": "dict", "items": {}},
        {"node": "float", "value": "nan"},
        {"node": "Var", "var": 0},
        {"node": "IntImm", "value": 1, "dtype": "int32"},
    ]
).map(copy.deepcopy)  # mutations edit values in place; keep the originals intact
JSON_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
JSON_VALUE = st.recursive(
    st.one_of(JSON_SCALAR, AWKWARD),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def deeply_nested(depth: int, kind: str) -> Any:
    """A list, object or expression nested ``depth`` levels, built without recursion."""
    value: Any = 1
    for _ in range(depth):
        if kind == "list":
            value = [value]
        elif kind == "dict":
            value = {"node": "dict", "items": {"x": value}}
        else:
            value = {"node": "Not", "a": value, "dtype": "bool"}
    return value


def accept(call: Any, *args: Any) -> None:
    """Run ``call``; succeeding or raising WorkloadError (with a message) are fine."""
    try:
        call(*args)
    except WorkloadError as err:
        assert str(err)


# ---- mutations of a JSON tree ---------------------------------------------------------


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every position in a JSON tree (the root too), as key/index paths."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(paths(item, (*prefix, index)))
    return found


def get(tree: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        tree = tree[step]
    return tree


MUTATIONS = ("drop", "replace", "awkward", "nest", "retype", "duplicate", "add_key")


@st.composite
def mutated(draw: st.DrawFn, document: Any) -> Any:
    """``document`` with one to three random edits at random positions."""
    tree = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(paths(tree)))
        how = draw(st.sampled_from(MUTATIONS))
        if not where:
            tree = draw(JSON_VALUE) if how in ("replace", "awkward") else tree
            continue
        parent, key = get(tree, where[:-1]), where[-1]
        if how == "drop":
            del parent[key]
        elif how == "replace":
            parent[key] = draw(JSON_VALUE)
        elif how == "awkward":
            parent[key] = draw(AWKWARD)
        elif how == "nest":
            parent[key] = deeply_nested(300, draw(st.sampled_from(["list", "dict", "expr"])))
        elif how == "retype":
            parent[key] = _retyped(parent[key])
        elif how == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
        elif how == "add_key" and isinstance(parent, dict):
            parent[draw(st.text(max_size=6))] = draw(JSON_VALUE)
    return tree


def _retyped(value: Any) -> Any:
    """The same content in another JSON type: a number as a string, a list as an
    object, and so on."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return {str(k): v for k, v in enumerate(value)}
    if isinstance(value, dict):
        return list(value.values())
    return value if value is None else [value]


# ---- specs ----------------------------------------------------------------------------

SPECS = [{"op": op, "args": EXAMPLES[op]} for op in sorted(EXAMPLES)]


@FUZZ
@given(data=st.data())
def test_mutated_specs_raise_only_workload_error(data: st.DataObject) -> None:
    spec = data.draw(st.sampled_from(SPECS))
    accept(workload_from_spec, data.draw(mutated(spec)))


ARG_NAMES = sorted({name for arg in (s["args"] for s in SPECS) for name in arg} | {"dtype"})


@FUZZ
@given(
    op=st.one_of(st.sampled_from(known_ops()), st.text(max_size=10)),
    args=st.dictionaries(st.sampled_from(ARG_NAMES), JSON_VALUE, max_size=6),
)
def test_random_specs_raise_only_workload_error(op: str, args: dict[str, Any]) -> None:
    accept(workload_from_spec, {"op": op, "args": args})


@FUZZ
@given(spec=JSON_VALUE)
def test_arbitrary_json_as_a_spec(spec: Any) -> None:
    accept(workload_from_spec, spec)


# ---- PrimFunc documents ---------------------------------------------------------------

DOC_OPS = ("matmul", "conv2d_nchw", "softmax", "layer_norm", "pad", "dense", "max_pool2d")
DOCUMENTS = [
    json.loads(workload_to_json(workload_from_spec({"op": op, "args": EXAMPLES[op]})))
    for op in DOC_OPS
]


@FUZZ
@given(data=st.data())
def test_mutated_documents_raise_only_workload_error(data: st.DataObject) -> None:
    document = data.draw(st.sampled_from(DOCUMENTS))
    changed = data.draw(mutated(document))
    accept(workload_from_json, changed)
    try:
        text = json.dumps(changed)
    except (ValueError, RecursionError):  # nan in a dict is fine; 3000 levels may not dump
        return
    accept(workload_from_json, text)


@FUZZ
@given(document=JSON_VALUE)
def test_arbitrary_json_as_a_document(document: Any) -> None:
    accept(workload_from_json, document if isinstance(document, dict) else json.dumps(document))


@FUZZ
@given(text=st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_random_text_as_a_document(text: str | bytes) -> None:
    accept(workload_from_json, text)


@pytest.mark.parametrize("kind", ["list", "dict", "expr"])
@pytest.mark.parametrize("depth", [300, 100_000])
def test_deep_nesting_is_refused(kind: str, depth: int) -> None:
    document = json.loads(workload_to_json(workload_from_spec(SPECS[0])))
    document["attrs"] = deeply_nested(depth, kind)
    with pytest.raises(WorkloadError, match=r"^\$\.attrs"):
        workload_from_json(document)
    text = "[" * depth + "]" * depth
    with pytest.raises(WorkloadError, match=r"^\$"):
        workload_from_json('{"format": "tensortune.primfunc", "version": 1, "vars": ' + text + "}")


def test_oversized_document_is_refused() -> None:
    text = workload_to_json(workload_from_spec(SPECS[0]))
    padded = text[:-1] + ',"padding":"' + "x" * (64 * 1024 * 1024) + '"}'
    with pytest.raises(WorkloadError, match="characters"):
        workload_from_json(padded)


def test_a_document_that_is_not_a_prim_func_names_the_field() -> None:
    with pytest.raises(WorkloadError, match=r"^\$\.format"):
        workload_from_json(json.dumps({"op": "matmul", "args": {"m": 1, "n": 1, "k": 1}}))
    with pytest.raises(WorkloadError, match=r"^\$: "):
        workload_from_json("[1, 2]")
    with pytest.raises(WorkloadError, match=r"^\$: "):
        workload_from_json(42)  # type: ignore[arg-type]
