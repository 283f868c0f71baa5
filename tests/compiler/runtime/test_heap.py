"""Kernels' heap temporaries are served from memory the process has already touched
(``compiler.runtime.heap``): past its first calls, a kernel takes no page fault."""

from __future__ import annotations

import sys

import pytest
from fresh_process import WINOGRAD_SPEC, run_fresh

from compiler.runtime import heap

# A Winograd convolution, unscheduled, whose transformed tiles live on the heap. With
# glibc's defaults every call of it faulted again, 850 times, measured. (Its default
# schedule, which register-tiles the batched products, no longer allocates enough per
# call for glibc to hand back to the system.)
CALLS_AFTER_WARMUP = """
    import json, resource, sys
    import numpy as np
    import compiler
    import compiler.runtime.module as module
    from compiler.workload.spec import workload_from_spec

    if sys.argv[1] == "without":
        module.keep_temporaries_in_heap = lambda: None
    func = workload_from_spec(json.loads(sys.argv[2]))
    kernel = compiler.build(func, target="llvm", default_schedule=False)
    rng = np.random.default_rng(0)
    data = rng.standard_normal((1, 64, 56, 56)).astype("float32")
    weight = rng.standard_normal((64, 64, 3, 3)).astype("float32")
    out = np.empty((1, 64, 56, 56), dtype="float32")
    for _ in range(20):
        kernel(data, weight, out)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        kernel(data, weight, out)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    padded = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    expected = np.einsum("nchwij,ocij->nohw", windows, weight)
    error = float(np.abs(out - expected).max() / np.abs(expected).max())
    print(faults, error)
"""


def _faults_and_error(mode: str) -> tuple[int, float]:
    faults, error = run_fresh(CALLS_AFTER_WARMUP, mode, WINOGRAD_SPEC).split()
    return int(faults), float(error)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_a_kernel_with_heap_temporaries_takes_no_page_fault_once_warm() -> None:
    faults, error = _faults_and_error("with")
    assert error < 1e-3
    assert faults <= 10  # a stray one or two; without the thresholds, thousands
    without, _ = _faults_and_error("without")
    assert without > 100 * max(faults, 1), "glibc no longer trims here: drop the test"


def test_a_threshold_the_user_set_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    set_by_us: list[tuple[int, int]] = []
    monkeypatch.setattr(heap, "_settled", False)
    monkeypatch.setattr(heap, "_mallopt", lambda: lambda p, v: set_by_us.append((p, v)) or 1)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "4096")
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    heap.keep_temporaries_in_heap()
    heap.keep_temporaries_in_heap()
    assert set_by_us == [(heap._M_MMAP_THRESHOLD, heap.MMAP_THRESHOLD_BYTES)]
