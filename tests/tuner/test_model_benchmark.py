"""benchmarks/model.py end to end on its shrunken models: built, checked against
onnxruntime, tuned for two trials each, and reported as one JSON object last. About a
minute on 2 cores, so left out of CI (``pytest -m slow`` runs it)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMAND = [
    str(ROOT / "benchmarks" / "model.py"),
    *("--models", "resnet18,bert", "--small", "--trials", "2", "--json"),
]


@pytest.mark.slow
def test_the_model_benchmark_runs_small_and_prints_json_last() -> None:
    result = subprocess.run(
        [sys.executable, *COMMAND],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout.strip().splitlines()[-1])
    assert document["trials"] == 2
    assert set(document["models"]) == {"resnet18", "bert"}
    for name, row in document["models"].items():
        assert row["onnxruntime_ms"] > 0
        for built in (row["default"], row["tuned"]):
            assert built["matches_onnxruntime"] and built["max_abs_error"] < 1e-3
            assert built["ms"] > 0 and built["onnxruntime_ms"] > 0
            pairs = built["pairs_ms"]
            assert len(pairs) == 3 and built["ms"] == pytest.approx(
                statistics.median(o for _, o in pairs)
            )
            assert built["vs_onnxruntime"] == pytest.approx(
                statistics.median(theirs / our for theirs, our in pairs), rel=1e-2
            )
            assert built["steps"] == sum(kind["steps"] for kind in built["time_by_kind"])
            assert built["launch_us_per_step"] >= 0
        assert row["tune_trials"] == 2 and row["tune_rounds"] == 2
        tuned = [task for task in row["tasks"] if task["worth_tuning"]]
        assert sum(task["trials"] for task in tuned) == 2
        assert all(task["trials"] is None for task in row["tasks"] if not task["worth_tuning"])
        assert any(task["in_model_ms"] for task in row["tasks"])  # the kernels the model runs
        assert f"{name} round 2: 2/2 trials" in result.stderr
