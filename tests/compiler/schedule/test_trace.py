"""Traces: printed Python that runs, JSON that round-trips, replay with other decisions,
and malformed documents rejected with ScheduleError."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest
from ir_interpreter import random_args, run_func

from compiler import te
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.structural import structural_equal
from compiler.schedule import Schedule, ScheduleError, Trace


def matmul_relu(m: int = 12, n: int = 10, k: int = 9) -> PrimFunc:
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), "k")
    Y = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="Y")
    C = te.compute((m, n), lambda i, j: te.max(Y[i, j], 0.0), name="C")
    return te.create_prim_func([A, B, C])


def vector_add(n: int = 10) -> PrimFunc:
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    return te.create_prim_func([A, B])


def stochastic(sch: Schedule) -> None:
    """Samples, splits with the samples, reorders, fuses, annotates and sets kinds."""
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=4))
    j0, j1, j2 = sch.split(j, sch.sample_perfect_tile(j, n=3, max_innermost_factor=4))
    inner = sch.sample_categorical(candidates=[1, 3, 9], probs=[1, 1, 1])
    k0, k1 = sch.split(k, [None, inner])
    sch.reorder(i0, j0, k0, i1, j1, k1, j2)
    fused = sch.fuse(i0, j0)
    sch.parallel(fused)
    sch.vectorize(j2)
    sch.unroll(k1)
    sch.annotate(y, "tile", [1, 2])
    (c_i, c_j) = sch.get_loops(sch.get_block("C"))
    sch.fuse(c_i, c_j)


def same_module(a: IRModule, b: IRModule) -> bool:
    return structural_equal(a, b) and a.script() == b.script()


def check_matmul_relu(mod: IRModule) -> None:
    a, b, c = random_args(mod)
    run_func(mod, a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)


# printing --------------------------------------------------------------------------


def test_list_outputs_print_as_unpacking_even_with_one_element() -> None:
    sch = Schedule(vector_add())
    b = sch.get_block("B")
    (i,) = sch.get_loops(b)
    (_tile,) = sch.sample_perfect_tile(i, n=1, max_innermost_factor=10)
    sch.split(i, [None, 5])
    sch.parallel(sch.get_loops(b)[0])
    lines = sch.trace.as_python()
    assert lines[0] == "b0 = sch.get_block(name='B', func_name='main')"
    assert lines[1] == "l1, = sch.get_loops(block=b0)"
    assert lines[2] == (
        "v2, = sch.sample_perfect_tile(loop=l1, n=1, max_innermost_factor=10, decision=[10])"
    )
    assert lines[3] == "l3, l4 = sch.split(loop=l1, factors=[None, 5], preserve_unit_iters=True)"
    assert lines[5] == "sch.parallel(loop=l5)"


def test_get_block_records_the_function_it_resolved() -> None:
    mod = IRModule({"first": vector_add(4), "second": vector_add(6)})
    sch = Schedule(mod)
    sch.work_on("second")
    b = sch.get_block("B")
    sch.split(sch.get_loops(b)[0], [2, 3])
    assert sch.trace.instructions[0].inputs["func_name"] == "second"
    replayed = Schedule(mod)
    Trace.from_json(sch.trace.as_json()).apply_to_schedule(replayed)
    assert same_module(replayed.mod, sch.mod)
    assert replayed.mod["first"] is mod["first"]


def test_the_trace_keeps_its_inputs_when_the_caller_changes_them() -> None:
    sch = Schedule(vector_add(12))
    (i,) = sch.get_loops(sch.get_block("B"))
    factors = [3, None]
    sch.split(i, factors)
    factors[0] = 5
    assert sch.trace.instructions[-1].inputs["factors"] == [3, None]


@pytest.mark.parametrize("seed", range(4))
def test_printed_python_reproduces_the_schedule(seed: int) -> None:
    sch = Schedule(matmul_relu(), seed=seed)
    stochastic(sch)
    fresh = Schedule(matmul_relu())
    exec("\n".join(sch.trace.as_python()), {"sch": fresh})
    assert same_module(fresh.mod, sch.mod)
    assert str(fresh.trace) == str(sch.trace)
    check_matmul_relu(fresh.mod)


# JSON ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_json_round_trip_replays_the_same_schedule(seed: int) -> None:
    func = matmul_relu()
    sch = Schedule(func, seed=seed)
    stochastic(sch)
    text = json.dumps(sch.trace.as_json())
    trace = Trace.from_json(json.loads(text))
    assert trace.to_json_string() == sch.trace.to_json_string()
    replayed = Schedule(func, seed=seed + 100)
    trace.apply_to_schedule(replayed)
    assert same_module(replayed.mod, sch.mod)
    assert replayed.trace.to_json_string() == sch.trace.to_json_string()
    check_matmul_relu(replayed.mod)


def test_replay_with_other_decisions_gives_the_other_schedule() -> None:
    func = matmul_relu()
    sch = Schedule(func, seed=0)
    stochastic(sch)
    indices = sorted(sch.trace.decisions)
    tile_i, tile_j, inner = indices
    other = {tile_i: [3, 4], tile_j: [5, 1, 2], inner: 2}

    direct = Schedule(func)
    y = direct.get_block("Y")
    i, j, k = direct.get_loops(y)
    i0, i1 = direct.split(i, direct.sample_perfect_tile(i, 2, 4, decision=[3, 4]))
    j0, j1, j2 = direct.split(j, direct.sample_perfect_tile(j, 3, 4, decision=[5, 1, 2]))
    v = direct.sample_categorical(candidates=[1, 3, 9], probs=[1, 1, 1], decision=2)
    k0, k1 = direct.split(k, [None, v])
    direct.reorder(i0, j0, k0, i1, j1, k1, j2)
    direct.parallel(direct.fuse(i0, j0))
    direct.vectorize(j2)
    direct.unroll(k1)
    direct.annotate(y, "tile", [1, 2])
    direct.fuse(*direct.get_loops(direct.get_block("C")))

    by_mapping = Schedule(func)
    sch.trace.apply_to_schedule(by_mapping, decisions=other)
    by_trace = Schedule(func)
    changed = sch.trace
    for index, decision in other.items():
        changed = changed.with_decision(index, decision)
    changed.apply_to_schedule(by_trace)
    assert same_module(by_mapping.mod, direct.mod)
    assert same_module(by_trace.mod, direct.mod)
    assert by_trace.trace.decisions == {tile_i: [3, 4], tile_j: [5, 1, 2], inner: 2}
    check_matmul_relu(by_trace.mod)


@pytest.mark.parametrize("seed", range(4))
def test_a_prefix_replayed_once_resumes_like_a_whole_replay(seed: int) -> None:
    """The prefix before the last decision is replayed once, copied and resumed under
    each of that decision's values: the same program as replaying it all each time."""
    func = matmul_relu()
    sch = Schedule(func, seed=seed)
    stochastic(sch)
    trace = sch.trace
    last = max(trace.decisions)
    prefix = Schedule(func)
    bindings = trace.replay_range(prefix, 0, last)
    for value in (1, 2, 0):
        resumed = prefix.copy()
        trace.replay_range(
            resumed,
            last,
            len(trace.instructions),
            decisions={last: value},
            bindings=dict(bindings),
        )
        whole = Schedule(func)
        trace.apply_to_schedule(whole, decisions={last: value})
        assert same_module(resumed.mod, whole.mod)
        assert resumed.trace.decisions == whole.trace.decisions


def test_replay_rejects_decisions_that_do_not_fit() -> None:
    func = matmul_relu()
    sch = Schedule(func, seed=0)
    stochastic(sch)
    tile_i = min(sch.trace.decisions)
    with pytest.raises(ScheduleError, match="product is 12"):
        sch.trace.apply_to_schedule(Schedule(func), decisions={tile_i: [5, 2]})
    with pytest.raises(ScheduleError, match="not a sampling instruction"):
        sch.trace.with_decision(0, [1])
    with pytest.raises(ScheduleError, match="not a sampling instruction"):
        sch.trace.apply_to_schedule(Schedule(func), decisions={0: 1})


# malformed documents -----------------------------------------------------------------


def good_document() -> dict[str, Any]:
    sch = Schedule(matmul_relu(), seed=0)
    stochastic(sch)
    return sch.trace.as_json()


def _set(path: list[Any], value: Any) -> Any:
    def edit(doc: dict[str, Any]) -> dict[str, Any]:
        target: Any = doc
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        return doc

    return edit


_DELETE = object()

MALFORMED = {
    "not an object": lambda doc: [doc],
    "wrong version": _set(["version"], 2),
    "boolean version": _set(["version"], True),
    "no instructions": _set(["instructions"], _DELETE),
    "instructions not a list": _set(["instructions"], {"0": 1}),
    "instruction not an object": _set(["instructions", 0], "get_block"),
    "kind missing": _set(["instructions", 0, "kind"], _DELETE),
    "inputs not an object": _set(["instructions", 1, "inputs"], [1]),
    "output name with unknown prefix": _set(["instructions", 0, "outputs"], ["x0"]),
    "output name without number": _set(["instructions", 0, "outputs"], ["b"]),
    "output name not a string": _set(["instructions", 0, "outputs"], [0]),
    "output defined twice": _set(["instructions", 1, "outputs"], ["l1", "l1", "l3"]),
    "rv used before defined": _set(["instructions", 1, "inputs", "block"], {"rv": "b9"}),
    "rv name not a string": _set(["instructions", 1, "inputs", "block"], {"rv": 3}),
    "unknown object": _set(["instructions", 1, "inputs", "block"], {"ref": "b0"}),
    "decision on a non-sampling instruction": _set(["instructions", 1, "decision"], [1]),
    "outputs_are_list not a bool": _set(["instructions", 1, "outputs_are_list"], "yes"),
}

FAILS_ON_REPLAY = {
    "unknown kind": _set(["instructions", 1, "kind"], "tile_everything"),
    "private method as kind": _set(["instructions", 1, "kind"], "_install"),
    "unknown input": _set(["instructions", 1, "inputs", "blocks"], {"rv": "b0"}),
    "missing input": _set(["instructions", 1, "inputs"], {}),
    "block where a loop belongs": _set(["instructions", 2, "inputs", "loop"], {"rv": "b0"}),
    "string as n": _set(["instructions", 2, "inputs", "n"], "2"),
    "bad decision": _set(["instructions", 2, "decision"], [7, 7]),
    "string as block name": _set(["instructions", 0, "inputs", "name"], ["Y"]),
    "unknown function": _set(["instructions", 0, "inputs", "func_name"], "nope"),
    "function name not a string": _set(["instructions", 0, "inputs", "func_name"], [1]),
    "too few outputs": _set(["instructions", 1, "outputs"], ["l1", "l2"]),
    "split factors not a list": _set(["instructions", 3, "inputs", "factors"], 3),
    "reorder loops not a list": _set(["instructions", 8, "inputs", "ordered_loops"], 1),
    "fuse loops not a list": _set(["instructions", 9, "inputs", "loops"], {"rv": "l1"}),
}


def test_the_malformed_cases_edit_the_document_they_name() -> None:
    doc = good_document()
    kinds = [inst["kind"] for inst in doc["instructions"]]
    assert kinds[:4] == ["get_block", "get_loops", "sample_perfect_tile", "split"]
    assert kinds[8:10] == ["reorder", "fuse"]


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_trace_json_is_rejected(case: str) -> None:
    doc = MALFORMED[case](copy.deepcopy(good_document()))
    with pytest.raises(ScheduleError):
        Trace.from_json(doc)
    with pytest.raises(ScheduleError):
        Trace.from_json(json.dumps(doc))


@pytest.mark.parametrize("case", sorted(FAILS_ON_REPLAY))
def test_trace_json_that_cannot_replay_raises_schedule_error(case: str) -> None:
    doc = FAILS_ON_REPLAY[case](copy.deepcopy(good_document()))
    with pytest.raises(ScheduleError):
        Trace.from_json(json.dumps(doc)).apply_to_schedule(Schedule(matmul_relu()))


@pytest.mark.parametrize("text", ["", "{", "[1, 2", "null", "42", '"trace"'])
def test_trace_text_that_is_not_a_json_object_is_rejected(text: str) -> None:
    with pytest.raises(ScheduleError):
        Trace.from_json(text)
