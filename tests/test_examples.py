"""Every walkthrough in examples/ runs to the end; each checks itself against numpy."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
ARGS = {"stochastic_schedule.py": ["--trials", "3"], "conv2d_nchwc.py": ["--small"]}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(path), *ARGS.get(path.name, [])],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
