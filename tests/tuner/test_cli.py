"""``tensortune tune / best / records``: bad input exits 2 with a message; a tuned
workload's best trace prints, and the printed trace replays to a correct kernel."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator

import numpy as np
import onnx
import pytest
from onnx_models import mlp

import compiler
import db
from compiler.runtime import cuda_driver
from compiler.schedule import Schedule, Trace
from compiler.workload.spec import workload_from_spec
from tuner.cli.commands import DESCRIPTION, build_parser
from tuner.cli.main import main

SHAPE = ["24", "40", "32"]


@pytest.fixture
def url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tune", "conv9d", "--shape", "1", "2", "3"], "unknown op 'conv9d'"),
        (["tune", "matmul", "--shape", "8", "8"], "matmul needs --shape M N K"),
        (["tune", "matmul", "--shape", "8", "0", "8"], "args.n: must be a positive integer"),
        (["tune", "matmul"], "matmul needs --shape M N K"),
        (["tune"], "name a workload"),
        (["tune", "relu"], "relu needs --shape D1 [D2 ...]"),
        (["tune", "pad", "--shape", "8"], "pad needs --arg pad_before=... --arg pad_after="),
        (["tune", "concatenate", "--shape", "8"], "concatenate takes no --shape"),
        (["tune", "conv2d_nchw", "--shape", "1", "8", "8", "8", "8"], "(6 positive integers)"),
        (["tune", "matmul", "--shape", *SHAPE, "--arg", "m=4"], "m is given by --shape and"),
        (["tune", "matmul", "--shape", *SHAPE, "--arg", "m"], "give NAME=VALUE"),
        (["tune", "matmul", "--shape", *SHAPE, "--arg", "x=1"], "args.x: unknown argument"),
        (["tune", "dense", "--shape", *SHAPE, "--arg", "activation=tanh"], "must be one of"),
        (["tune", "relu", "--shape", "8", "--arg", "a=1", "--arg", "a=2"], "given twice"),
        (["tune", "relu", "--shape", "8", "--spec", "{}"], "not both"),
        (["tune", "--spec", "{oops"], "is not valid JSON"),
        (
            ["tune", "--spec", '{"op": "relu", "args": {"shape": [8]}}', "--space", "template"],
            "no registered template",
        ),
        (["tune", "matmul", "--shape", *SHAPE, "--template", "nope"], "unknown template"),
        (["tune", "matmul", "--shape", *SHAPE, "--trials", "0"], "--trials must be at least 1"),
        (["tune", "missing.json"], "cannot read the spec file"),
        (["best", "matmul", "--shape", "8"], "matmul needs --shape M N K"),
        (["tune", "dense", "--shape", *SHAPE, "--constant", "V"], "constant parameter 'V'"),
        (
            [
                "tune",
                "--spec",
                '{"op": "relu", "args": {"shape": [8]}, "constants": 3}',
                "--constant",
                "A",
            ],
            "the spec's constants must be a list",
        ),
        (["records", "--limit", "0"], "--limit must be from 1 to 10000"),
    ],
)
def test_bad_input_exits_2_with_a_message(argv, message, url, capsys):
    assert main([*argv, "--db", url]) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith(f"tensortune {argv[0]}: error:")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tune", "matmul", "--shape", *SHAPE, "--tuner", "bogus"], "invalid choice: 'bogus'"),
        (["tune", "matmul", "--shape", "8", "x", "8"], "invalid int value: 'x'"),
        (["tune", "matmul", "--workers", "cloud"], "invalid choice: 'cloud'"),
        (["tune", "matmul", "--shape", *SHAPE, "--target", "cuda"], "no single GPU architecture"),
        (["tune", "matmul", "--shape", *SHAPE, "--target", "opencl"], "unknown target 'opencl'"),
    ],
)
def test_argparse_rejections_exit_2(argv, message, url, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--db", url])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_best_of_an_untuned_workload_says_so(url, capsys):
    assert main(["best", "matmul", "--shape", *SHAPE, "--db", url]) == 1
    assert "tune it first" in capsys.readouterr().err


def test_a_constant_weight_is_stored_in_the_tuned_layout(url, capsys, rng):
    """``--constant W`` makes another workload, whose best trace lays out W; the module
    built from the database converts W with its pack function."""
    dense = ["dense", "--shape", *SHAPE, "--constant", "W", "--db", url]
    assert main(["tune", *dense, "--trials", "4", "--batch-size", "4", "--space", "generated"]) == 0
    capsys.readouterr()
    assert main(["best", *dense, "--json"]) == 0
    trace = Trace.from_json(capsys.readouterr().out.strip())
    assert any(inst.kind == "transform_layout" for inst in trace.instructions)
    assert main(["best", "dense", "--shape", *SHAPE, "--db", url]) == 1  # not tuned without
    assert "tune it first" in capsys.readouterr().err


def test_tune_then_best_prints_a_trace_that_replays(url, tmp_path, capsys, rng):
    spec = {"op": "matmul", "args": {"m": 24, "n": 40, "k": 32}}
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    tune_argv = ["tune", str(spec_file), "--trials", "8", "--batch-size", "8", "--db", url]
    assert main([*tune_argv, "--tuner", "random", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "8 measured this run" in out and "GFLOP/s" in out

    assert main(["tune", "matmul", "--shape", *SHAPE, "--trials", "8", "--db", url]) == 0
    assert "0 measured this run (0 errors), 8 restored" in capsys.readouterr().out

    assert main(["best", "matmul", "--shape", *SHAPE, "--db", url, "--json"]) == 0
    trace = Trace.from_json(capsys.readouterr().out.strip())
    assert main(["best", "--spec", json.dumps(spec), "--db", url]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("\n".join(trace.as_python()))
    assert "GFLOP/s" in printed.splitlines()[-1]
    assert re.search(r"GFLOP/s, re-timed: fastest of \d+ runs \(record \d+\)$", printed.strip())

    func = workload_from_spec(spec)
    sch = Schedule(func)
    trace.apply_to_schedule(sch)
    kernel = compiler.build(sch.mod)
    a = rng.standard_normal((24, 32), dtype=np.float32)
    b = rng.standard_normal((32, 40), dtype=np.float32)
    c = np.zeros((24, 40), dtype=np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)

    assert main(["records", "matmul", "--shape", *SHAPE, "--db", url, "--limit", "5"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 1 + 5 + 1 and listed[-1].startswith("more: --before ")
    assert "purpose" in listed[0]
    before = listed[-1].split()[-1]
    assert main(["records", "--db", url, "--limit", "10", "--before", before]) == 0
    rest = capsys.readouterr().out.splitlines()[1:]
    # 8 search measurements, and each of the two runs re-timed the 3 best (a re-timing
    # whose round failed, as on a machine too busy for its deadline, stores nothing)
    with db.create(url) as database:
        stored = database.count()
        retimed = len(database.records(purpose=db.Purpose.RETIME))
    assert stored == 8 + retimed and 1 <= retimed <= 6
    assert len(rest) == stored - 5
    assert sum(" retime " in line for line in listed + rest) == retimed


def test_help_opens_with_one_line_saying_what_tensortune_does(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    paragraphs = capsys.readouterr().out.split("\n\n")
    assert paragraphs[1] == DESCRIPTION
    assert "exit codes: 0 done; 1 a failure" in paragraphs[-1]


def _target_flags(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, str]]:
    """(command, help of --target) of every command that takes a target."""
    for action in parser._actions:
        if "--target" in action.option_strings:
            yield path, action.help or ""
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _target_flags(sub, f"{path} {name}".strip())


def test_every_command_taking_a_target_says_what_a_target_is():
    flags = dict(_target_flags(build_parser(), ""))
    assert {"tune", "best", "submit", "submit-model", "tune-model", "run", "ray-node"} <= set(flags)
    for command, help_text in flags.items():
        assert "llvm -mcpu=CPU" in help_text and "cuda -arch=sm_XX" in help_text, command


GPU_TUNE = ["tune", "matmul", "--shape", *SHAPE, "--target", "cuda -arch=sm_80"]


def test_a_gpu_target_without_the_cuda_extra_names_the_extra_and_exits_3(url, monkeypatch, capsys):
    cuda_bindings = pytest.importorskip("cuda.bindings")
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", None)
    monkeypatch.delattr(cuda_bindings, "driver", raising=False)
    cuda_driver._driver.cache_clear()
    try:
        code = main([*GPU_TUNE, "--db", url])
    finally:
        cuda_driver._driver.cache_clear()
    err = capsys.readouterr().err
    assert code == 3, err
    assert err.count("\n") == 1 and "pip install 'tensortune[cuda]'" in err
    with db.create(url) as database:
        assert database.count() == 0


def test_run_refuses_to_export_a_model_built_for_a_gpu(tmp_path, url, capsys):
    model = tmp_path / "mlp.onnx"
    onnx.save(mlp(np.random.default_rng(0)), str(model))
    argv = ["run", str(model), "--target", "cuda -arch=sm_80", "--export", str(tmp_path / "out")]
    assert main([*argv, "--db", url]) == 2
    assert "--export writes a model built for the CPU" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
