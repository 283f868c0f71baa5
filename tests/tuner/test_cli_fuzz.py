"""The ``tensortune`` command line under random input: every command line either
succeeds or ends with one error line, never a traceback, a hang or a signal.

Arguments come from hypothesis: random flags of every command, numbers at the edges
of their types, random text, and files with random content for ``--spec``, ``db
import`` and the model commands (``tune-model``, ``run``), beside a real small model
and one whose weights name a file beside it. Sizes stay at 3 or below (or beyond
int64): a valid workload with a dimension of a billion is a long run by nature, not a
fault. Ray is left out (a
cluster start per example would dominate the time); its addresses are fuzzed only in
forms that must be refused before any connection.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnx_models
import pytest
from cli_server import ESCAPED, CliServer, Outcome
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.workload.spec import known_ops

EDGE_NUMBERS = [
    "-1",
    "0",
    "1",
    "2",
    "3",
    "2147483647",
    "2147483648",
    "9223372036854775807",
    "9223372036854775808",
    "99999999999999999999999",
    "-99999999999999999999999",
    "1e30",
    "nan",
    "1.5",
    "",
    "x",
]
COMMANDS = ["tune", "best", "records", "tune-model", "run"]
COMMANDS += ["upgrade", "current", "export", "import", "merge", "prune"]
SMALL_SHAPED_OPS = ["matmul", "batch_matmul", "dense"]
SMALL_SIZES = ["-1", "0", "1", "2", "3", "9223372036854775808", "99999999999999999999999", "x"]
SPEC_VALUES = [-1, 0, 1, 2, 3, 2**63, 10**30, 1.5, 1e30, None, True, "x", [], [2, 3], [0], {}]
SPEC_KEYS = ["m", "n", "k", "batch", "shape", "in_channels", "out_channels", "height", "width"]
SPEC_KEYS += ["kernel", "padding", "stride", "axis", "in_features", "out_features", "dtype"]

text = st.text(max_size=12)
numbers = st.one_of(st.sampled_from(EDGE_NUMBERS), text)
spec_dicts = st.fixed_dictionaries(
    {"op": st.one_of(st.sampled_from(known_ops()), text)},
    optional={"args": st.dictionaries(st.sampled_from(SPEC_KEYS), st.sampled_from(SPEC_VALUES))},
)
file_contents = st.one_of(
    st.binary(max_size=300),
    spec_dicts.map(lambda spec: json.dumps(spec).encode()),
    st.lists(spec_dicts.map(json.dumps), max_size=4).map(lambda lines: "\n".join(lines).encode()),
)


class Files:
    """Writes each example's file contents to a new file under ``folder``, which also
    holds ``models``: a small ONNX model, and one whose weight names a file beside it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.names: Iterator[int] = itertools.count()
        model = onnx_models.mlp(np.random.default_rng(0))
        onnx.save(model, folder / "mlp.onnx")
        (folder / "w.bin").write_bytes(
            onnx_models.external_data(model.graph.initializer[0], "w.bin")
        )
        onnx.save(model, folder / "external.onnx")
        self.models = [str(folder / "mlp.onnx"), str(folder / "external.onnx")]

    def write(self, content: bytes) -> str:
        path = self.folder / f"input-{next(self.names)}"
        path.write_bytes(content)
        return str(path)


@st.composite
def working_command_lines(draw: st.DrawFn, url: str) -> list[str]:
    """A command line naming a small real workload with sensible values, so that the
    fuzz also takes the paths that do the work: tuning, printing the best, paging."""
    shape = draw(st.lists(st.sampled_from(["1", "2", "3"]), min_size=3, max_size=3))
    command = draw(st.sampled_from(["tune", "tune", "best", "records"]))
    argv = [command, "matmul", "--shape", *shape, "--db", url]
    if command == "tune":
        argv += ["--trials", draw(st.sampled_from(["1", "2", "4"]))]
        argv += ["--tuner", draw(st.sampled_from(["xgb", "ga", "random", "grid"]))]
        argv += ["--seed", draw(st.sampled_from(["0", "1", "4294967295"]))]
        argv += ["--batch-size", draw(st.sampled_from(["1", "2", "16"]))]
    return argv


@st.composite
def working_model_command_lines(draw: st.DrawFn, files: Files, url: str) -> list[str]:
    """``tune-model`` or ``run`` of the small model with sensible values."""
    model = files.models[0]
    if draw(st.booleans()):
        return [
            "tune-model",
            model,
            "--trials",
            draw(st.sampled_from(["1", "2", "4"])),
            "--db",
            url,
        ]
    output = str(files.folder / f"output-{next(files.names)}.npz")
    return ["run", model, "--output", output, "--db", url]


def model_flags(draw: st.DrawFn, files: Files, command: str) -> list[str]:
    """Random flags of ``tune-model`` or ``run`` (after the model)."""

    def flag(name: str, values: st.SearchStrategy[str]) -> list[str]:
        return [name, draw(values)] if draw(st.booleans()) else []

    folder = str(files.folder)
    argv = flag("--shape", st.sampled_from(["x=4,16", "x=2,16", "x=", "=", "x=0,16", "y=1", "x"]))
    argv += flag("--target", st.sampled_from(["llvm", "llvm -mcpu=nosuch", "cuda -arch=sm_80"]))
    if command == "tune-model":
        argv += flag(
            "--trials", st.sampled_from(["1", "2", "0", "-1", "x", "99999999999999999999"])
        )
        argv += flag("--round", numbers) + flag("--seed", numbers)
        argv += flag("--scheduler", st.sampled_from(["gradient", "round-robin", "bogus", ""]))
    else:
        missing = "/nonexistent/dir/out.npz"
        argv += flag("--inputs", st.one_of(file_contents.map(files.write), text))
        argv += flag("--output", st.sampled_from([missing, folder, f"{folder}/out.npz"]))
        argv += flag("--export", st.sampled_from([f"{folder}/export/deeper", files.models[0]]))
    return argv


@st.composite
def command_lines(draw: st.DrawFn, files: Files, url: str) -> list[str]:
    """One random command line of any ``tensortune`` command; one in four names a
    real workload sensibly (``working_command_lines``)."""
    if draw(st.integers(0, 3)) == 0:
        if draw(st.integers(0, 3)) == 0:
            return draw(working_model_command_lines(files, url))
        return draw(working_command_lines(url))

    def flag(name: str, values: st.SearchStrategy[str]) -> list[str]:
        return [name, draw(values)] if draw(st.booleans()) else []

    workload = st.one_of(
        st.sampled_from([*SMALL_SHAPED_OPS, *known_ops()]),
        text,
        st.text(alphabet="0123456789abcdef", min_size=1, max_size=64),
        file_contents.map(files.write),
    )
    spec = st.one_of(spec_dicts.map(json.dumps), text, file_contents.map(files.write))
    databases = st.sampled_from([url, url, url, "", "sqlite://", "nosuch://x", "not a url"])
    argv: list[str] = []
    command = draw(st.sampled_from(COMMANDS))
    if command in ("tune", "best", "records"):
        argv = [command]
        if draw(st.booleans()):
            argv.append(draw(workload))
        if draw(st.booleans()):
            argv += ["--shape", *draw(st.lists(st.sampled_from(SMALL_SIZES), max_size=4))]
        argv += flag("--spec", spec)
        argv += flag("--arg", st.sampled_from(["stride=2", "activation=relu", "x", "=", "m=[1]"]))
        argv += flag("--target", st.sampled_from(["llvm", "llvm -mcpu=nosuch", "cuda", "", "x"]))
    if command == "tune":
        argv += flag("--trials", numbers) + flag("--batch-size", numbers)
        argv += flag("--early-stopping", numbers) + flag("--seed", numbers)
        argv += flag("--template", st.one_of(text, st.just("matmul")))
        argv += flag("--tuner", st.sampled_from(["xgb", "ga", "random", "grid", "bogus", ""]))
        argv += flag("--workers", st.sampled_from(["local", "cloud", ""]))
        argv += flag("--ray-address", st.sampled_from(["not an address", "", "host:port", ":"]))
        spaces = ["auto", "template", "", "x", "nosuch:fn", "json:dumps", "math:pi"]
        argv += flag("--space", st.sampled_from(spaces))
    elif command == "best":
        argv += ["--json"] if draw(st.booleans()) else []
    elif command == "records":
        argv += flag("--limit", numbers) + flag("--before", numbers)
    elif command in ("tune-model", "run"):
        models = st.one_of(st.sampled_from(files.models), text, file_contents.map(files.write))
        argv = [command, draw(models), *model_flags(draw, files, command)]
    elif command in ("upgrade", "current", "export", "import", "merge", "prune"):
        argv = ["db", command]
        if command == "upgrade":
            argv += flag("--revision", st.one_of(st.sampled_from(["head", "base"]), text))
        elif command == "export":
            argv += flag("--best", numbers)
            argv += flag("-o", st.sampled_from(["/nonexistent/dir/out", str(files.folder)]))
        elif command == "import":
            argv.append(draw(st.one_of(file_contents.map(files.write), text)))
        elif command == "merge":
            argv.append(draw(st.one_of(st.just(url), text, file_contents.map(files.write))))
        else:
            argv += flag("--keep", numbers)
    if draw(st.booleans()):
        argv += ["--db", draw(databases)]
    return argv


def check(argv: list[str], outcome: Outcome) -> None:
    """Success, or a non-zero exit whose last stderr line is tensortune's one-line
    error (argparse may print its usage above it); never a traceback or a fault."""
    shown = f"tensortune {' '.join(map(repr, argv))}\n--- stderr ---\n{outcome.stderr}"
    assert outcome.fault is None, f"{outcome.fault}: {shown}"
    assert outcome.code != ESCAPED, f"an exception left main(): {shown}"
    assert "Traceback" not in outcome.stderr, f"a traceback: {shown}"
    if outcome.code == 0:
        return
    lines = outcome.stderr.strip().split("\n")
    assert lines, f"exit {outcome.code} without a message: {shown}"
    assert lines[-1].startswith("tensortune"), f"not a tensortune error line: {shown}"
    before = lines[:-1]
    assert not before or before[0].startswith("usage:"), f"more than one error line: {shown}"


@pytest.fixture(scope="module")
def fuzz_home(tmp_path_factory) -> Iterator[tuple[CliServer, Files, str]]:
    home = tmp_path_factory.mktemp("cli-fuzz")
    url = f"sqlite:///{home / 'tuning.db'}"
    env = {**os.environ, "TENSORTUNE_DB_URL": url, "XDG_DATA_HOME": str(home), "HOME": str(home)}
    server = CliServer(env, home / "stderr.log", timeout_s=240.0)
    seeded = ["tune", "matmul", "--shape", "2", "3", "2", "--trials", "4", "--db", url]
    check(seeded, server.run(seeded))
    files_folder = home / "files"
    files_folder.mkdir()
    try:
        yield server, Files(files_folder), url
    finally:
        server.close()


def fuzz(fuzz_home: tuple[CliServer, Files, str], examples: int) -> None:
    server, files, url = fuzz_home

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def one_command_line(data: st.DataObject) -> None:
        argv = data.draw(command_lines(files, url), label="argv")
        check(argv, server.run(argv))

    one_command_line()


def test_random_command_lines_succeed_or_say_why_in_one_line(fuzz_home) -> None:
    fuzz(fuzz_home, examples=20)


@pytest.mark.slow
def test_five_hundred_random_command_lines(fuzz_home) -> None:
    fuzz(fuzz_home, examples=500)
