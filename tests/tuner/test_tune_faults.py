"""``tensortune tune / best / records`` under bad input and faults, through the real
command line in a subprocess: Ctrl-C (a SIGINT to the whole process group, as a
terminal sends it) at set-up and mid-run, a parent killed under its workers, bad
options, a Ray address where nothing listens, workload key prefixes, and failures
shown with their kind and message. Each case ends with a non-zero exit, one line
naming the input and the fix, no traceback from any process, and every record
stored before still there, unchanged. Waits end on events (a line, a file), never on
a clock."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from faulty_workers import wait_for

import db
from compiler.errors import ErrorKind
from compiler.workload.key import workload_key
from compiler.workload.spec import workload_from_spec
from tuner.failures import describe_failures, group_failures

ROOT = str(Path(__file__).resolve().parents[2])
SHAPE = ["16", "16", "16"]
RUN_TIMEOUT_S = 300  # a bound for a loaded machine, not a wait


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, path]))}


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuner.cli.main", *argv],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def _start(*argv: str) -> subprocess.Popen[str]:
    """The command line in a session (so a process group) of its own, as a shell runs
    a foreground job."""
    return subprocess.Popen(
        [sys.executable, "-m", "tuner.cli.main", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        start_new_session=True,
    )


def _records(url: str) -> list[db.TuningRecord]:
    with db.create(url) as database:
        return database.records(limit=10_000)


def _one_line_error(done: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert all(word in lines[0] for word in words), lines[0]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> Path:
    """A database holding a small tuned matmul: the records no failure may touch."""
    path = tmp_path_factory.mktemp("tuned") / "tuned.db"
    done = _cli(
        "tune", "matmul", "--shape", *SHAPE, "--trials", "4", "--batch-size", "4",
        "--tuner", "random", "--db", f"sqlite:///{path}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture
def url(tuned, tmp_path) -> Iterator[str]:
    copy = tmp_path / "copy.db"
    shutil.copy(tuned, copy)
    yield f"sqlite:///{copy}"


def _long_run(url: str) -> subprocess.Popen[str]:
    """A run of 400 trials, 8 a batch: far longer than any test waits for."""
    return _start(
        "tune", "matmul", "--shape", "48", "48", "48", "--trials", "400", "--batch-size", "8",
        "--tuner", "random", "--db", url,
    )  # fmt: skip


def _read_until(process: subprocess.Popen[str], line_has: str) -> list[str]:
    """Standard error's lines up to the first that holds ``line_has``; fails when the
    stream ends first (the process finished without ever printing it)."""
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if line_has in line:
            return seen
    raise AssertionError(f"standard error ended without {line_has!r}: {''.join(seen)[-500:]}")


def _finish(process: subprocess.Popen[str], seen: list[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=RUN_TIMEOUT_S)
    return process.returncode, out, "".join(seen) + err


def _check_interrupted(code: int, out: str, err: str) -> None:
    assert code == 130, err
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in out + err, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("tensortune: interrupted"), lines[-1]
    assert "run the same command again" in lines[-1]
    assert all("trials |" in line for line in lines[:-1]), err  # progress lines only


def test_ctrl_c_mid_run_ends_with_one_line_and_keeps_every_record(url):
    before = _records(url)
    process = _long_run(url)
    seen = _read_until(process, "17/400 trials")  # the default schedule, two batches of 8
    committed = _records(url)
    os.killpg(process.pid, signal.SIGINT)
    code, out, err = _finish(process, seen)
    _check_interrupted(code, out, err)
    after = _records(url)
    assert set(before) <= set(committed) <= set(after)
    stored = [r for r in after if r.workload_key != before[0].workload_key]
    ok = sum(r.ok for r in stored)
    assert f"{len(stored)} records of" in err and f"({ok} successful)" in err
    if ok:
        assert "(no successful schedule stored)" not in out


def test_ctrl_c_during_set_up_ends_with_one_line(tmp_path, url):
    before = _records(url)
    fresh = tmp_path / "fresh.db"
    process = _start("tune", "matmul", "--shape", *SHAPE, "--db", f"sqlite:///{fresh}")
    wait_for(fresh)  # the database is being made: the run is setting up
    os.killpg(process.pid, signal.SIGINT)
    code, out, err = _finish(process, [])
    assert code == 130, err
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in out + err, err
    assert err.strip().splitlines()[-1].startswith("tensortune: interrupted"), err
    assert _records(url) == before


def test_an_error_of_a_clean_up_cut_short_by_ctrl_c_ends_with_one_line() -> None:
    """A Ctrl-C inside a library's clean-up can make it fail with an error of its own
    (SQLAlchemy's transaction close asserts); the run still ends as interrupted."""
    script = (
        "import sys\n"
        "class CtrlC:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'tuner.cli.commands':\n"
        "            try:\n"
        "                raise KeyboardInterrupt\n"
        "            except KeyboardInterrupt:\n"
        "                raise AssertionError\n"
        "sys.meta_path.insert(0, CtrlC())\n"
        "from tuner.cli.main import main\n"
        "sys.exit(main(['records']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=_env(), timeout=60
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "tensortune: interrupted", done.stderr


def test_ctrl_c_while_the_commands_are_imported_ends_with_one_line() -> None:
    """The first second of a run imports LLVM, XGBoost and SQLAlchemy; a Ctrl-C then
    (here: a KeyboardInterrupt out of the import of the commands) ends with one line."""
    script = (
        "import sys\n"
        "class CtrlC:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'tuner.cli.commands':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, CtrlC())\n"
        "from tuner.cli.main import main\n"
        "sys.exit(main(['records']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    _one_line_error(done, 130, "interrupted")


def test_a_library_logging_the_interrupt_it_was_in_prints_no_traceback(url) -> None:
    """As SQLAlchemy's pool does when a Ctrl-C lands in the reset of a connection it
    takes back: logged with its traceback, to no handler. Other errors still print."""
    script = (
        "import logging, sys\n"
        "from tuner.cli.main import main\n"
        "main(['records', '--db', sys.argv[1]])\n"
        "pool = logging.getLogger('sqlalchemy.pool.impl.QueuePool')\n"
        "for error in (KeyboardInterrupt, ValueError):\n"
        "    try:\n"
        "        raise error\n"
        "    except BaseException:\n"
        "        pool.error('Exception during reset or similar', exc_info=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, url],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert "KeyboardInterrupt" not in done.stderr, done.stderr
    assert done.stderr.count("Exception during reset or similar") == 1, done.stderr
    assert "ValueError" in done.stderr


def test_workers_of_a_killed_run_exit_quietly(url):
    before = _records(url)
    process = _long_run(url)
    _read_until(process, "9/400 trials")  # the default schedule and a batch of 8
    process.kill()
    # Standard error ends when the last worker that shares it has exited.
    assert process.stderr is not None
    rest = process.stderr.read()
    process.wait()
    assert "Traceback" not in rest and "Error" not in rest, rest
    assert set(before) <= set(_records(url))


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--seed", "-1"], ["--seed", "-1", "at least 0"]),
        (["--seed", str(2**40)], ["--seed", "at most 4294967295"]),
        (["--trials", str(10**30)], ["--trials", "at most"]),
        (["--batch-size", "0"], ["--batch-size", "at least 1"]),
        (["--early-stopping", "-3"], ["--early-stopping"]),
        (["--ray-address", "not an address"], ["'not an address'", "host:port"]),
        (["--ray-address", "127.0.0.1:99999"], ["'127.0.0.1:99999'", "host:port"]),
        (["--workers", "ray", "--ray-connect-timeout", "0"], ["--ray-connect-timeout"]),
    ],
)
def test_bad_tune_options_store_nothing(flags, words, url):
    before = _records(url)
    done = _cli("tune", "matmul", "--shape", "20", "20", "20", *flags, "--db", url)
    _one_line_error(done, 2, "tensortune tune: error:", *words)
    assert _records(url) == before
    with db.create(url) as database:
        keys = {entry.key for entry in database.workloads()}
    bad = workload_key(workload_from_spec({"op": "matmul", "args": dict.fromkeys("mnk", 20)}))
    assert bad not in keys  # the bad run did not commit its workload


def test_a_ray_address_where_nothing_listens_fails_in_bounded_time(url):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    before = _records(url)
    done = _cli(
        "tune", "matmul", "--shape", *SHAPE, "--ray-address", f"127.0.0.1:{port}",
        "--ray-connect-timeout", "5", "--db", url,
    )  # fmt: skip
    _one_line_error(done, 1, f"127.0.0.1:{port}", "ray start --head")
    assert _records(url) == before


def test_a_key_prefix_names_a_workload(url):
    (key,) = {r.workload_key for r in _records(url)}
    listed = _cli("records", "--db", url)
    assert listed.returncode == 0 and key[:12] in listed.stdout
    for prefix in (key[:12], key[:8], key):
        done = _cli("best", prefix, "--db", url)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().splitlines()[-1].startswith(f"# {key[:12]}")
        listed = _cli("records", prefix, "--db", url)
        assert listed.stdout.count(key[:12]) == len(_records(url))


@pytest.mark.parametrize(
    ("prefix", "words"),
    [
        ("0123456789ab", ["'0123456789ab'", "no stored workload key starts with"]),
        ("abc1234", ["'abc1234'", "at least 8"]),
    ],
)
def test_an_unknown_or_short_key_prefix_is_a_usage_error(prefix, words, url):
    for command in ("best", "records"):
        _one_line_error(_cli(command, prefix, "--db", url), 2, *words)


def test_records_show_each_failure_kind_and_message(url):
    (key,) = {r.workload_key for r in _records(url)}
    trace = _records(url)[0].trace
    with db.create(url) as database:
        database.commit_records(
            [
                db.Measurement.failed(
                    key, "llvm", trace, ErrorKind.RUN_ERROR, "MemoryError: cannot allocate"
                )
            ]
        )
    done = _cli("records", key[:12], "--db", url, "--target", "llvm")
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if "run_error" in line]
    assert line.endswith("MemoryError: cannot allocate")


def test_a_run_summary_groups_failures_by_kind_with_the_first_message():
    failures = [(ErrorKind.RUN_ERROR, f"MemoryError: attempt {n}") for n in range(8)]
    failures.append((ErrorKind.TIMEOUT, "running the candidate took longer than 10 s\nmore"))
    text = describe_failures(group_failures(failures))
    assert text == (
        "9 failed: 8 run_error (MemoryError: attempt 0); "
        "1 timeout (running the candidate took longer than 10 s)"
    )
    assert describe_failures(()) == ""
