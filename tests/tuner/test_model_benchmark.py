"""benchmarks/model.py end to end on its shrunken models: built, checked against
onnxruntime, tuned for two trials each, and reported as one JSON object last. About a
minute on 2 cores, so left out of CI (``pytest -m slow`` runs it). And the FMA loop
whose throughput is the peak that the task table measures kernels against."""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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


@pytest.fixture(scope="module")
def fma_peak() -> ModuleType:
    """benchmarks/fma_peak.py, loaded once (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location("fma_peak", ROOT / "benchmarks" / "fma_peak.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("iterations", [0, 1, 3, 40])
def test_the_fma_loop_runs_every_chain_as_often_as_asked(
    fma_peak: ModuleType, iterations: int
) -> None:
    """Each chain is ``acc * 0.5 + 1`` from 0, so after n steps 2 - 2 ** (1 - n); the
    loop returns the sum over its chains (exact in float32 for these n)."""
    loop = fma_peak.FmaLoop()
    chain = 2.0 - 2.0 ** (1 - iterations) if iterations else 0.0
    assert loop(iterations) == pytest.approx(fma_peak.ACCUMULATORS * chain, rel=1e-6)
    assert loop.flops(iterations) == 2 * loop.lanes * fma_peak.ACCUMULATORS * iterations
