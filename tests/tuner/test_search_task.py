"""TuneTask: the workload, key, target and flop count a tuning run reports against."""

from __future__ import annotations

import json

import pytest

from compiler.target.parse import canonical_target
from compiler.workload.key import workload_key
from compiler.workload.spec import WorkloadError, workload_from_spec
from tuner.task import TuneTask


def test_a_task_from_a_spec_matches_what_the_build_looks_up() -> None:
    spec = {"op": "matmul", "args": {"k": 7, "m": 5, "n": 3}}
    task = TuneTask.from_spec(spec)
    assert task.workload_key == workload_key(workload_from_spec(spec))
    assert task.target == canonical_target("llvm") and task.target.startswith("llvm -mcpu=")
    assert task.flop_count == 2 * 5 * 3 * 7
    assert json.loads(task.spec or "")["args"] == {
        "m": 5,
        "n": 3,
        "k": 7,
        "transpose_a": False,
        "transpose_b": False,
        "dtype": "float32",
    }
    assert task.gflops(1e-9) == pytest.approx(task.flop_count)


def test_a_task_from_a_function_has_no_spec() -> None:
    func = workload_from_spec({"op": "softmax", "args": {"shape": [4, 6]}})
    task = TuneTask.from_func(func, target="llvm -mcpu=znver3")
    assert task.spec is None and task.target.startswith("llvm -mcpu=znver3 -mattr=+avx,+avx2")
    assert task == TuneTask.from_func(func, target="llvm -mcpu=znver3")


def test_a_bad_spec_names_the_field() -> None:
    with pytest.raises(WorkloadError, match=r"args\.m"):
        TuneTask.from_spec({"op": "matmul", "args": {"m": -1, "n": 2, "k": 2}})
