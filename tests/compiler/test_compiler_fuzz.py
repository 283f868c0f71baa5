"""Random tensor expressions whose indices may leave their buffers, under random
schedules, are either refused with a named CompilerError or compute what numpy
computes: never a segfault, never garbage. Generated code runs in a child process,
so a crash is a failure that names its example instead of killing pytest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUPPORT = REPO / "tests" / "support"


def fuzz(first_seed: int, count: int) -> Counter[str]:
    path = os.pathsep.join(str(p) for p in (REPO, SUPPORT))
    child = subprocess.run(
        [sys.executable, str(SUPPORT / "compiler_fuzz_cases.py"), str(first_seed), str(count)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": path},
    )
    lines = [json.loads(line) for line in child.stdout.splitlines()]
    started = [line["start"] for line in lines if "start" in line]
    assert child.returncode == 0, f"died ({child.returncode}) on {started[-1:]}: {child.stderr}"
    results = [line for line in lines if "outcome" in line]
    wrong = [r for r in results if r["outcome"] == "wrong"]
    assert not wrong, wrong
    assert len(results) == count
    return Counter(r["outcome"] for r in results)


def test_random_expressions_and_schedules_are_refused_or_right() -> None:
    outcomes = fuzz(0, 200)
    assert outcomes["ok"] > 20 and outcomes["refused"] > 20, outcomes


@pytest.mark.slow
def test_random_expressions_and_schedules_at_length() -> None:
    outcomes = Counter[str]()
    for first in range(10_000, 12_000, 500):
        outcomes += fuzz(first, 500)
    print(f"fuzzed {sum(outcomes.values())} examples: {dict(outcomes)}, 0 crashed")
    assert sum(outcomes.values()) == 2000
