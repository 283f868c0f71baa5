"""The JSON round trip of PrimFuncs: every node kind survives, the canonical string
is deterministic and name-blind, and every malformed document is refused with
IRFormatError naming the bad field's path."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ir_examples import RECIPES, build, mm_relu
from ir_interpreter import random_args, run_func

from compiler import te
from compiler.ir import expr as E
from compiler.ir import serialize
from compiler.ir.buffer import Buffer
from compiler.ir.function import PrimFunc
from compiler.ir.serialize import IRFormatError, from_json, to_json, to_json_string
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
    seq,
    true_predicate,
)
from compiler.ir.structural import structural_equal
from compiler.schedule import Schedule

ROOT = Path(__file__).resolve().parents[3]


def every_node_kind() -> PrimFunc:
    """A function that uses every statement and expression kind the format knows."""
    n = E.Var("n")
    x = E.Var("x", "float32")
    A = Buffer("A", (n, E.const(7)), "float32")
    B = Buffer("B", (E.const(7),), "int32")
    tmp = Buffer("tmp", (E.const(7),), "float64", scope="local")
    scratch = Buffer("scratch", (E.const(2),), "int8")
    i, j, vi = E.Var("i"), E.Var("j"), E.Var("vi")
    load = A[i, j]
    exprs = [
        E.Select(E.Not(i < j) & (j >= 1) | (i == j), load, E.const(-math.inf)),
        E.Cast("float32", B[j]) + E.Call("exp", (load,), "float32"),
        E.Max(load, E.Min(load, E.FloatImm(2.5, "float32"))),
        E.Cast("float32", B[j] // 2 + B[j] % 3 - E.Div(B[j], E.const(2)) * 4),
        E.Cast("float32", E.IntImm(1, "bool")) + E.Cast("float32", (i != j) & (i <= j)),
        E.Cast("float32", E.const(7, "int64") > E.Cast("int64", i)),
        E.Call("pow", (load, x * 0 + E.const(2.0)), "float32"),
    ]
    stores = [BufferStore(A, e, (i, j)) for e in exprs]
    body = seq(
        *stores,
        IfThenElse(i < 3, Evaluate(i + 1), Evaluate(j)),
        IfThenElse(i > 3, Evaluate(i)),
        Allocate(scratch, BufferStore(scratch, E.const(1, "int8"), (E.const(0),))),
    )
    block = Block(
        "work",
        (IterVar(vi, E.Range(E.const(1), E.const(6)), IterKind.REDUCE),),
        BufferStore(tmp, E.Cast("float64", A[vi, vi]), (vi,)),
        init=BufferStore(tmp, E.const(0.0, "float64"), (E.const(0),)),
        alloc_buffers=(tmp,),
        annotations={"note": "x", "nested": {"list": [1, 2.5, None, True]}, "nan": math.nan},
    )
    realize = BlockRealize((i + 1,), i < 6, block)
    inner = For(j, E.const(0), E.const(7), ForKind.VECTORIZED, seq(body, realize))
    loops = For(
        i, E.const(0), n, ForKind.PARALLEL, inner, thread_binding="blockIdx.x", annotations={"k": 1}
    )
    root = Block("root", (), SeqStmt((loops, Evaluate(x))), alloc_buffers=())
    func = PrimFunc((A, B), BlockRealize((), true_predicate(), root), {"global_symbol": "all"})
    return func.with_attr("flags", [1, "two", {"three": 3.0}])


def round_trip(func: PrimFunc) -> PrimFunc:
    return from_json(json.loads(json.dumps(to_json(func))))


def test_every_node_kind_round_trips() -> None:
    func = every_node_kind()
    back = round_trip(func)
    assert structural_equal(func, back)
    assert back.script() == func.script()
    assert to_json(back) == to_json(func)


def test_names_survive_to_json() -> None:
    back = round_trip(mm_relu(n=None))
    assert [p.name for p in back.params] == ["A", "B", "C"]
    assert back.size_vars[0].name == "n"
    assert back.attrs["global_symbol"] == "mm_relu"


def test_scheduled_function_round_trips_and_computes_the_same() -> None:
    func = mm_relu(n=None)
    sch = Schedule(func)
    _i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.split(j, [None, 7])
    sch.split(k, [5, None])
    scheduled = sch.mod["main"]
    back = from_json(to_json_string(scheduled))
    assert structural_equal(scheduled, back)
    sizes = {"n": 5}
    args = random_args(scheduled, sizes=sizes)
    expected = [a.copy() for a in args]
    run_func(scheduled, *expected)
    run_func(back, *args)
    np.testing.assert_allclose(args[2], expected[2], rtol=1e-6)
    a, b = args[0], args[1]
    np.testing.assert_allclose(args[2], np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_canonical_string_is_sorted_compact_and_name_blind() -> None:
    text = to_json_string(mm_relu())
    assert " " not in text and "\n" not in text
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    renamed = mm_relu(names=("X", "W", "C"), renamed_indices=True)
    assert to_json_string(renamed) == text
    assert to_json_string(mm_relu(relu_floor=0.5)) != text
    assert '"name":"A"' not in text
    assert '"name":"Y"' in text  # block names stay: schedules refer to them
    assert to_json(mm_relu()) != to_json(renamed)  # to_json keeps names


def test_canonical_string_round_trips() -> None:
    func = mm_relu(n=None)
    back = from_json(to_json_string(func))
    assert structural_equal(func, back)
    assert [p.name for p in back.params] == ["b0", "b1", "b2"]
    assert to_json_string(back) == to_json_string(func)


def test_canonical_string_is_the_same_in_another_process() -> None:
    script = (
        "import sys, hashlib; sys.path.insert(0, 'tests/support');"
        "from ir_examples import mm_relu;"
        "from compiler.ir.serialize import to_json_string;"
        "print(hashlib.sha256(to_json_string(mm_relu(n=None)).encode()).hexdigest())"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={"PYTHONHASHSEED": "7", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    import hashlib

    here = hashlib.sha256(to_json_string(mm_relu(n=None)).encode()).hexdigest()
    assert done.stdout.strip() == here


def test_non_finite_floats_are_plain_json() -> None:
    A = te.placeholder((5,), name="A")
    k = te.reduce_axis((0, 5), "k")
    M = te.compute((1,), lambda i: te.max(A[k], axis=k), name="M")
    func = te.create_prim_func([A, M])
    text = to_json_string(func)
    assert "Infinity" not in text and '"-inf"' in text
    assert structural_equal(func, from_json(text))


# malformed documents ----------------------------------------------------------------


def good() -> dict[str, Any]:
    return to_json(mm_relu())


def first_store(doc: dict[str, Any]) -> dict[str, Any]:
    """The first BufferStore of the Y block (its init) inside ``doc``."""
    loops = doc["body"]["block"]["body"]["seq"][0]
    node = loops
    while node["node"] == "For":
        node = node["body"]
    return node["block"]["init"]


def expect_error(doc: Any, *fragments: str) -> None:
    with pytest.raises(IRFormatError) as info:
        from_json(doc)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_wrong_type() -> None:
    doc = good()
    doc["params"] = "A"
    expect_error(doc, "$.params", "expected a list")
    doc = good()
    first_store(doc)["indices"][0] = {"node": "Var", "var": True}
    expect_error(doc, ".init.indices[0].var", "expected an integer")
    expect_error([], "$", "expected an object")


def test_unknown_node_kind() -> None:
    doc = good()
    first_store(doc)["value"]["node"] = "Exec"
    expect_error(doc, "$.body.block.body.seq[0].body.body.body.block.init.value.node", "'Exec'")
    doc = good()
    doc["body"]["block"]["body"]["seq"][0]["node"] = "IntImm"
    expect_error(doc, "$.body.block.body.seq[0].node", "unknown statement kind")


def test_unknown_dtype() -> None:
    doc = good()
    doc["buffers"][0]["dtype"] = "float128"
    expect_error(doc, "$.buffers[0].dtype", "float128", "float32")
    doc = good()
    first_store(doc)["value"]["dtype"] = "int32"
    expect_error(doc, ".init.value.dtype", "expected one of float16")


def test_dangling_references() -> None:
    doc = good()
    first_store(doc)["indices"][1]["var"] = 99
    expect_error(doc, ".init.indices[1].var", "variable 99")
    doc = good()
    first_store(doc)["buffer"] = 7
    expect_error(doc, ".init.buffer", "buffer 7")
    doc = good()
    doc["params"].append(-1)
    expect_error(doc, "$.params[3]", "buffer -1")


def test_missing_field() -> None:
    doc = good()
    del first_store(doc)["indices"]
    expect_error(doc, ".init", "missing field 'indices'")
    doc = good()
    del doc["version"]
    expect_error(doc, "$.version")


def test_wrong_arity_and_unknown_enum() -> None:
    doc = good()
    first_store(doc)["indices"].pop()
    expect_error(doc, ".init.indices", "2 dimensions, indexed with 1")
    doc = good()
    doc["body"]["block"]["body"]["seq"][0]["kind"] = "warp"
    expect_error(doc, "$.body.block.body.seq[0].kind", "serial", "parallel")


def test_too_deep() -> None:
    value: dict[str, Any] = {"node": "IntImm", "value": 1, "dtype": "int32"}
    for _ in range(serialize.MAX_DEPTH + 5):
        value = {"node": "Add", "a": value, "b": value, "dtype": "int32"}
    doc = good()
    first_store(doc)["indices"][0] = value
    expect_error(doc, "nested deeper")
    deep = "[" * 100_000 + "]" * 100_000
    expect_error(deep, "$")


def test_too_large(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serialize, "MAX_NODES", 20)
    expect_error(good(), "more than 20 nodes")
    monkeypatch.setattr(serialize, "MAX_CHARS", 100)
    expect_error(to_json_string(mm_relu()), "characters")


def test_not_json_and_wrong_header() -> None:
    expect_error("{not json", "$", "not JSON")
    expect_error("1" * 5000, "$")
    doc = good()
    doc["format"] = "other"
    expect_error(doc, "$.format")
    doc = good()
    doc["version"] = 2
    expect_error(doc, "$.version", "version 1")


def test_unserializable_function() -> None:
    func = mm_relu()
    bad = func.with_attr("callback", print)
    with pytest.raises(IRFormatError, match=r"\$\.attrs\.callback"):
        to_json(bad)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.extend(_paths(item, (*prefix, index)))
    return out


_DOC = to_json(mm_relu(n=None))
_ALL_PATHS = _paths(_DOC)[1:]
_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 50),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.sampled_from(["float32", "Add", "For", "Var", "S", "R", "parallel"]),
    st.just([]),
    st.just({}),
    st.just({"node": "Var", "var": 0}),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_ALL_PATHS), st.one_of(st.just("delete"), _JUNK))
def test_mutated_documents_fail_only_with_ir_format_error(path: tuple[Any, ...], junk: Any) -> None:
    doc = copy.deepcopy(_DOC)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if junk == "delete":
        if isinstance(parent, list):
            parent.pop(path[-1])
        else:
            del parent[path[-1]]
    else:
        parent[path[-1]] = junk
    try:
        func = from_json(doc)
    except IRFormatError:
        return
    assert isinstance(func, PrimFunc)
    func.script()


@settings(max_examples=150, deadline=None)
@given(RECIPES, RECIPES)
def test_canonical_string_agrees_with_structural_equality(
    first: tuple[Any, ...], second: tuple[Any, ...]
) -> None:
    def wrap(recipe: tuple[Any, ...]) -> PrimFunc:
        variables = [te.var(f"x{k}") for k in range(3)]
        body = Evaluate(build(recipe, variables))
        root = Block("root", (), body)
        return PrimFunc((), BlockRealize((), true_predicate(), root))

    a, b = wrap(first), wrap(second)
    assert structural_equal(a, b) == (to_json_string(a) == to_json_string(b))
    assert structural_equal(a, from_json(to_json_string(a)))
