"""Targets LLVM would abort the process on (an unknown CPU or feature, a CPU without
64-bit code, an x86-64 baseline feature turned off) are a TargetError before LLVM
sees them, in Python and from the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import compiler
from compiler import te
from compiler.target.errors import TargetError
from compiler.target.llvm import LLVMTarget

REPO = Path(__file__).resolve().parents[3]


def small_func():
    A = te.placeholder((8,), name="A")
    C = te.compute((8,), lambda i: A[i] * 2.0, name="C")
    return te.create_prim_func([A, C])


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("llvm -mcpu=nonexistentcpu", "LLVM knows no CPU 'nonexistentcpu'"),
        ("llvm -mcpu=skylak", "did you mean 'skylake'"),
        ("llvm -mcpu=i386", "CPU 'i386' cannot run 64-bit code"),
        ("llvm -mcpu=pentium4", "CPU 'pentium4' cannot run 64-bit code"),
        ("llvm -mattr=+avx9000", "LLVM knows no feature 'avx9000'"),
        ("llvm -mcpu=x86-64 -mattr=-sse2", "cannot be turned off; drop '-sse2'"),
        ("llvm -mcpu=x86-64 -mattr=-64bit", "cannot be turned off; drop '-64bit'"),
        ("llvm -mattr=+32bit-mode", "is set by the triple"),
        ("llvm -mtriple=nosuch-triple", "leave out -mtriple"),
    ],
)
def test_targets_llvm_would_abort_on_are_refused(target: str, message: str) -> None:
    with pytest.raises(TargetError, match=message):
        LLVMTarget.parse(target)
    with pytest.raises(TargetError, match=message):
        compiler.build(small_func(), target=target)


def test_an_unknown_cpu_message_says_how_to_list_the_known_ones() -> None:
    with pytest.raises(TargetError) as info:
        LLVMTarget.parse("llvm -mcpu=nonexistentcpu")
    assert "python -m compiler.target.llvm_catalogue" in str(info.value)
    listing = subprocess.run(
        [sys.executable, "-m", "compiler.target.llvm_catalogue"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert "x86-64\n" in listing.stdout and "avx2\n" in listing.stdout


def test_a_target_made_directly_is_checked_before_code_is_generated() -> None:
    with pytest.raises(TargetError, match="cannot run 64-bit code"):
        compiler.build(small_func(), target=LLVMTarget("i386", ""))


CHECK_EVERY_CPU = """
from compiler import te
import compiler
from compiler.target.llvm_catalogue import catalogue
from compiler.target.errors import TargetError
from compiler.target.llvm import init_llvm
import llvmlite.binding as llvm
init_llvm()
A = te.placeholder((8,), name="A")
C = te.compute((8,), lambda i: A[i] * 2.0, name="C")
func = te.create_prim_func([A, C])
for cpu in sorted(catalogue(llvm.get_process_triple()).cpus):
    print(cpu, flush=True)
    try:
        compiler.build(func, target=f"llvm -mcpu={cpu}")
    except TargetError:
        pass
print("done")
"""


def test_every_cpu_llvm_lists_is_refused_or_builds() -> None:
    """A CPU missing from the list of 32-bit ones would end the process: the child
    that builds for each CPU then dies, and its last line names the CPU."""
    child = subprocess.run(
        [sys.executable, "-c", CHECK_EVERY_CPU],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    last = child.stdout.strip().splitlines()[-1:]
    assert child.returncode == 0 and last == ["done"], f"died at {last}: {child.stderr[-500:]}"


def tensortune(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuner.cli.main", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_the_cli_refuses_an_unknown_cpu_in_one_line_and_stores_nothing(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    shape = ["--shape", "8", "8", "8"]
    seeded = tensortune("tune", "matmul", *shape, "--trials", "2", "--batch-size", "2", "--db", url)
    assert seeded.returncode == 0, seeded.stderr
    before = tensortune("records", "--db", url).stdout
    bad = "llvm -mcpu=nonexistentcpu"
    result = tensortune("tune", "matmul", *shape, "--trials", "8", "--target", bad, "--db", url)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert "'nonexistentcpu'" in lines[0] and "leave out -mcpu" in lines[0]
    assert tensortune("records", "--db", url).stdout == before


CHECK_FROM_THREADS = """
import threading
import compiler
from compiler.target.llvm import LLVMTarget
start = threading.Barrier(8)
failed = []
def check():
    start.wait()
    try:
        LLVMTarget.parse("llvm")
    except Exception as err:
        failed.append(repr(err))
threads = [threading.Thread(target=check) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(failed or "ok")
"""


def test_the_first_checks_of_a_process_may_come_from_many_threads() -> None:
    """LLVM lists its CPUs once per process: a second thread reading the list at the
    same time used to see none, keep that, and refuse every target after."""
    for _ in range(3):
        child = subprocess.run(
            [sys.executable, "-c", CHECK_FROM_THREADS],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert child.stdout.strip() == "ok", child.stdout + child.stderr[-500:]
