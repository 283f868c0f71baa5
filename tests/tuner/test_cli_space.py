"""``tensortune tune --space``: a schedule function named ``module:function`` tunes an
operator through the real program, resumes, and its best trace replays when the
workload is built with the database; so does the generated space of an operator
without a template (``--space auto``); a ``--space`` that names nothing usable (or
that the ``--tuner`` cannot search) is a one-line usage error (exit 2)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import compiler
from compiler.tuned.lookup import apply_best
from compiler.workload.spec import workload_from_spec
from db import SQLDatabase
from tuner.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"
M, N, K = 16, 24, 8
SHAPE = ["matmul", "--shape", str(M), str(N), str(K)]


def tensortune(folder: Path, *argv: str) -> subprocess.CompletedProcess:
    """The real program, run in ``folder`` (where a user keeps their schedules)."""
    return subprocess.run(
        [sys.executable, "-m", "tuner.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=folder,
    )


def test_a_schedule_function_tunes_resumes_and_replays_from_the_command_line(tmp_path, rng):
    shutil.copy(SUPPORT / "schedule_fns.py", tmp_path / "my_schedules.py")
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    argv = [*SHAPE, "--space", "my_schedules:tile_matmul", "--trials", "4", "--db", url]
    first = tensortune(tmp_path, "tune", *argv, "--batch-size", "4", "--tuner", "random")
    assert first.returncode == 0, first.stderr
    assert "schedule function tile_matmul" in first.stdout
    assert "4 measured this run (0 errors), 0 restored" in first.stdout

    again = tensortune(tmp_path, "tune", *argv)
    assert again.returncode == 0, again.stderr
    assert "0 measured this run (0 errors), 4 restored" in again.stdout

    func = workload_from_spec({"op": "matmul", "args": {"m": M, "n": N, "k": K}})
    with SQLDatabase(url) as database:
        _, report = apply_best(compiler.IRModule({"main": func}), "llvm", database)
        kernel = compiler.build(func, database=database)
    assert report.tuned == ["main"]
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    c = np.zeros((M, N), dtype=np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_an_op_without_a_template_tunes_in_the_generated_space_and_replays(tmp_path, rng):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    argv = ["softmax", "--shape", "16", "40", "--trials", "4", "--batch-size", "4", "--db", url]
    done = tensortune(tmp_path, "tune", *argv)
    assert done.returncode == 0, done.stderr
    assert "generated space" in done.stdout
    assert "4 measured this run (0 errors), 0 restored" in done.stdout
    func = workload_from_spec({"op": "softmax", "args": {"shape": [16, 40]}})
    with SQLDatabase(url) as database:
        _, report = apply_best(compiler.IRModule({"main": func}), "llvm", database)
        kernel = compiler.build(func, database=database)
    assert report.tuned == ["main"]
    x = rng.standard_normal((16, 40), dtype=np.float32)
    y = np.zeros_like(x)
    kernel(x, y)
    expected = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, expected / expected.sum(axis=1, keepdims=True), rtol=1e-5)


def test_a_space_that_cannot_be_imported_is_one_line_and_exit_2(tmp_path):
    done = tensortune(tmp_path, "tune", *SHAPE, "--space", "my_schedules:tile_matmul")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("tensortune tune: error: --space: cannot import 'my_schedules'")
    assert "run from its folder or put that folder on PYTHONPATH" in done.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--space", "fastest"],
            "space 'fastest' is neither auto nor template nor generated nor a schedule",
        ),
        (["--space", "schedule_fns:"], "e.g. 'my_schedules:tile_matmul'"),
        (["--space", "schedule_fns:missing"], "module 'schedule_fns' has no 'missing'"),
        (["--space", "schedule_fns:NOT_A_FUNCTION"], "'int', not a schedule function"),
        (["--space", "schedule_fns:fixed_tiles"], "calls no sampling instruction"),
        (["--space", "schedule_fns:tile_matmul_relu"], "does not schedule this workload"),
        (["--space", "schedule_fns:raises_midway"], "ZeroDivisionError: a bug in the user's"),
        (
            ["--space", "schedule_fns:tile_matmul", "--template", "matmul.x86"],
            "template 'matmul.x86' goes with the space 'auto' or 'template'",
        ),
        (["--space", "template", "--template", "nope"], "--space: unknown template"),
        (
            ["--space", "schedule_fns:tile_matmul", "--tuner", "grid"],
            "--tuner grid: grid search needs a space that numbers its points",
        ),
    ],
)
def test_bad_space_values_are_usage_errors(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "path", list(sys.path))
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["tune", *SHAPE, *argv, "--db", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tensortune tune: error: --") and err.count("\n") == 1
    assert message in err
