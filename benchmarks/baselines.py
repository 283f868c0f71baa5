"""What the tuning benchmarks compare with: numpy's strongest formulation, onnxruntime
(where installed) and the default schedule, timed the way the tuner's re-timing does.

Imported by ``tune.py`` and ``search.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from onnx_peer import session_for

import compiler
from compiler.ir.layout_free import layout_free_positions
from compiler.runtime.prepacked import pack_arguments
from compiler.runtime.profiling import time_raw
from compiler.topi.reference import numpy_function
from tuner.task import TuneTask

REPEATS = 7
WINDOWS = 10
WINDOW_GAP_S = 0.2


def seconds_per_call(call: Callable[[], Any]) -> float:
    """The statistic the tuner's runner uses (the fastest of ``REPEATS`` loops of at
    least 20 ms), taken in ``WINDOWS`` windows spread over about three seconds; the
    fastest. A parallel kernel's speed can change for seconds at a time with how the
    machine runs its threads (``timing_stability.py``); spread out, the windows catch
    its steady best, as the run's re-timing does."""
    windows = []
    for _ in range(WINDOWS):
        windows.append(time_raw(call, (), 1, REPEATS, 20.0).min)
        time.sleep(WINDOW_GAP_S)
    return min(windows)


def reference_of(task: TuneTask) -> Callable[..., np.ndarray]:
    """The strongest plain-numpy formulation of the task's operator."""
    assert task.spec is not None
    return numpy_function(json.loads(task.spec))


def baselines(task: TuneTask, spec: dict[str, Any], arrays: list[np.ndarray]) -> dict[str, Any]:
    inputs = arrays[:-1]
    reference = reference_of(task)
    expected = reference(*inputs)
    numpy_seconds = seconds_per_call(lambda: reference(*inputs))
    row: dict[str, Any] = {"numpy_gflops": task.gflops(numpy_seconds)}
    peer = session_for(spec, inputs, arrays[-1].ndim, layout_free_positions(task.func))
    if peer is not None:
        np.testing.assert_allclose(
            peer.in_workload_layout(peer.run()), expected, rtol=1e-3, atol=1e-3
        )
        row["onnxruntime_gflops"] = task.gflops(seconds_per_call(peer.run))
    default = compiler.build(task.func, target=task.target)
    entry = default[default.entry_name]
    converted = pack_arguments(default, entry.name, arrays)  # constant weights, once
    row["default_gflops"] = task.gflops(seconds_per_call(lambda: entry(*converted)))
    return row


def print_baselines(name: str, row: dict[str, Any]) -> None:
    """The workload's name and the GFLOP/s ``baselines`` found."""
    print(f"== {name}")
    peers = f"numpy {row['numpy_gflops']:.1f}"
    if "onnxruntime_gflops" in row:
        peers += f"  onnxruntime {row['onnxruntime_gflops']:.1f}"
    print(f"  {peers}  default schedule {row['default_gflops']:.1f} GFLOP/s")


def rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value
