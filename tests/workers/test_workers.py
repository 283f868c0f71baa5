"""The workers' data, references and the local backend, with real processes, real
LLVM builds and real faults (a segfault, a hang) made by the test-only builder and
measurer of ``faulty_workers``, which the backend runs in place of its own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from faulty_workers import (
    BUILD_FUNCTION,
    MEASURER,
    TESTS_FOLDER,
    Fault,
    wait_for,
)
from worker_candidates import (
    BUILD_TIMEOUT_S,
    GROWN_LOOP_MS,
    MATMUL,
    TEST_CONFIG,
    custom_candidate,
    illegal_candidate,
    kinds,
    matmul_candidate,
    slow_candidate,
    spec_candidate,
    swapped_artifact,
)

import compiler
import compiler.target.llvm
import workers
from compiler.errors import ErrorKind
from compiler.ir.layout_free import mark_layout_free
from compiler.runtime.profiling import ProfileResult
from compiler.schedule import Schedule
from compiler.topi.reference import NUMPY_REFERENCES
from compiler.workload.key import workload_from_json
from compiler.workload.spec import normalize_spec, workload_from_spec
from workers import (
    Builder,
    BuildResult,
    Candidate,
    MeasureConfig,
    RunResult,
    Workers,
    WorkersError,
)
from workers import measure as measure_module
from workers.check import make_reference
from workers.measure import LONG_CALL_RUNS, Measurer, time_in_steps


def test_a_runner_keeps_references_up_to_its_byte_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """References are kept while their arrays fit the budget, least recently used out
    first; the newest stays even when it alone is over."""
    made: list[str] = []
    compute = measure_module._reference_or_reason

    def counted(candidate: Candidate, seed: int) -> Any:
        made.append(candidate.workload)
        return compute(candidate, seed)

    monkeypatch.setattr(measure_module, "_reference_or_reason", counted)
    small, large = (
        Candidate.make(func, Schedule(func).trace)
        for func in (
            workload_from_spec({"op": "matmul", "args": {"m": 8, "n": 8, "k": 8}}),
            workload_from_spec({"op": "matmul", "args": {"m": 64, "n": 64, "k": 64}}),
        )
    )
    config = MeasureConfig()
    roomy = Measurer(host="here", reference_bytes=1 << 20)
    for candidate in (small, large, small, large):
        assert roomy.prepare(candidate, config) is None
    assert made == [small.workload, large.workload]
    made.clear()
    tight = Measurer(host="here", reference_bytes=32 << 10)  # the large one is 64 KiB
    for candidate in (small, large, large, small):
        assert tight.prepare(candidate, config) is None
    assert made == [small.workload, large.workload, small.workload]


class _CountingBuilder(Builder):
    """A real builder that notes every candidate it is given."""

    def __init__(self, inner: Builder) -> None:
        self.inner = inner
        self.given: list[Candidate] = []

    def stream(self, candidates: Sequence[Candidate]) -> Iterator[tuple[int, BuildResult]]:
        self.given.extend(candidates)
        return self.inner.stream(candidates)

    def close(self) -> None:
        """The fixture that made the real builder closes it."""


def test_a_candidate_measured_again_soon_is_not_built_again(local: Workers) -> None:
    """A search confirms its fastest trials right after measuring them: the build is
    kept (a failed one is not), and the run gets the new candidate's cutoff."""
    counting = _CountingBuilder(local.builder)
    backend = Workers(counting, local.runner)
    first, second = matmul_candidate(2), matmul_candidate(3)
    unbuildable = dataclasses.replace(first, trace="{")
    backend.measure([first, second, unbuildable])
    again = dataclasses.replace(first, cutoff_seconds=5.0)
    runs = backend.measure([again, unbuildable])
    assert counting.given == [first, second, unbuildable, unbuildable]
    check_ok(runs[0])
    assert runs[0].candidate == again
    assert runs[1].error_kind is ErrorKind.BUILD_ERROR


def check_ok(result: RunResult, repeat: int = TEST_CONFIG.repeat) -> None:
    assert result.ok, result.error
    assert len(result.run_times) == repeat
    assert all(0 < t < 1 for t in result.run_times)
    assert result.number >= 1


# ---- data -------------------------------------------------------------------------------


def test_create_lists_the_kinds() -> None:
    with pytest.raises(WorkersError, match="local, ray"):
        workers.create("slurm")


def test_results_hold_a_value_or_an_error_never_both() -> None:
    candidate = matmul_candidate()
    with pytest.raises(ValueError, match="never both"):
        RunResult(candidate, (1e-3,), 1, ErrorKind.RUN_ERROR, "boom")
    with pytest.raises(ValueError, match="never both"):
        RunResult(candidate)
    with pytest.raises(ValueError, match="never both"):
        BuildResult(candidate, error_kind=ErrorKind.BUILD_ERROR)
    failed = RunResult.failed(candidate, ErrorKind.TIMEOUT, "slow", "host")
    assert RunResult.from_json(json.loads(json.dumps(failed.to_json()))) == failed


def test_failures_need_a_message() -> None:
    with pytest.raises(ValueError, match="needs a message"):
        RunResult.failed(matmul_candidate(), ErrorKind.INTERNAL, " ")


def test_hooks_are_named_module_colon_attribute() -> None:
    with pytest.raises(WorkersError, match='not a "module:attribute" name'):
        workers.create("local", measurer="workers.measure.Measurer")
    with pytest.raises(WorkersError, match="cannot import 'no_such_module'"):
        workers.create("local", build_function="no_such_module:build")
    with pytest.raises(WorkersError, match="has no 'Measure'"):
        workers.create("local", measurer="workers.measure:Measure")


def test_candidate_is_plain_json() -> None:
    candidate = matmul_candidate(seed=3)
    bounded = dataclasses.replace(candidate, cutoff_seconds=2.5e-3, contender_seconds=1e-3)
    for sent in (candidate, bounded):
        assert Candidate.from_json(json.loads(json.dumps(sent.to_json()))) == sent
    with pytest.raises(TypeError, match="JSON text"):
        Candidate({"op": "matmul"}, "{}")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cutoff_seconds must be a positive"):
        dataclasses.replace(candidate, cutoff_seconds=0.0)
    with pytest.raises(ValueError, match="contender_seconds must be a positive"):
        dataclasses.replace(candidate, contender_seconds=-1.0)


def test_measure_config_checks_its_values() -> None:
    with pytest.raises(ValueError, match="repeat"):
        MeasureConfig(repeat=0)
    with pytest.raises(ValueError, match="timeout_s"):
        MeasureConfig(timeout_s=0)


# ---- references -------------------------------------------------------------------------

SHAPES = {"shape_a": [3, 1, 5], "shape_b": [4, 5]}
IMAGE = {"batch": 2, "channels": 3, "height": 7, "width": 6}
CONV = {"batch": 2, "in_channels": 4, "height": 7, "width": 6, "out_channels": 6, "kernel": 3}
REFERENCE_SPECS: dict[str, dict[str, Any]] = {
    "matmul": {"m": 5, "n": 7, "k": 3, "transpose_a": True},
    "batch_matmul": {"batch": 2, "m": 3, "n": 5, "k": 7},
    "dense": {"batch": 3, "in_features": 5, "out_features": 7, "activation": "sigmoid"},
    **{op: {"shape": [3, 5]} for op in ("relu", "sigmoid", "exp", "log", "sqrt", "tanh")},
    **{op: {"shape": [3, 5]} for op in ("abs", "negative")},
    **{op: SHAPES for op in ("add", "subtract", "multiply", "divide", "maximum", "minimum")},
    "power": SHAPES,
    **{op: {"shape": [3, 4, 5], "axis": [0, 2], "keepdims": True} for op in ("sum", "max")},
    **{op: {"shape": [3, 4, 5], "axis": 1} for op in ("min", "mean")},
    "softmax": {"shape": [3, 5]},
    "log_softmax": {"shape": [3, 5], "axis": 0},
    "transpose": {"shape": [2, 3, 4], "axes": [2, 0, 1]},
    "reshape": {"shape": [2, 3, 4], "newshape": [4, -1]},
    "gelu": {"shape": [3, 5]},
    "layer_norm": {"shape": [3, 4, 5], "axis": [1, 2]},
    "pad": {"shape": [2, 3], "pad_before": [1, 0], "pad_after": [0, 2], "pad_value": 0.5},
    "concatenate": {"shapes": [[2, 3], [2, 4]], "axis": 1},
    "conv2d_nchw": {**CONV, "stride": [2, 1], "padding": [1, 0, 2, 1], "dilation": [1, 2]},
    "conv2d_nhwc": {**CONV, "stride": 2, "padding": 1, "groups": 2},
    "conv2d_nchw_bias_relu": {**CONV, "padding": 1},
    "conv2d_winograd_nchw": {**{k: v for k, v in CONV.items() if k != "kernel"}, "padding": 1},
    "depthwise_conv2d_nchw": {**IMAGE, "kernel": 3, "padding": 1, "multiplier": 2},
    "max_pool2d": {**IMAGE, "kernel": 3, "stride": 2, "padding": 1},
    "avg_pool2d": {**IMAGE, "kernel": 3, "stride": 2, "padding": 1},
    "global_avg_pool2d": IMAGE,
}


@pytest.mark.parametrize("op", sorted(NUMPY_REFERENCES))
def test_numpy_reference_agrees_with_the_unscheduled_build(op: str) -> None:
    spec = normalize_spec({"op": op, "args": REFERENCE_SPECS[op]})
    func = workload_from_spec(spec)
    reference = make_reference(func, spec, seed=5)
    assert reference.source == f"numpy {op}"
    assert all(np.all(a != 0) for a in reference.arguments)
    arrays = reference.fresh_arguments()
    assert reference.mismatch(arrays, None) is not None  # outputs not written yet
    compiler.build(func, default_schedule=False)(*arrays)
    assert reference.mismatch(arrays, None) is None


def test_reference_mismatch_names_the_output_and_the_place() -> None:
    func = workload_from_spec(MATMUL)
    reference = make_reference(func, normalize_spec(MATMUL), seed=0)
    arrays = reference.fresh_arguments()
    arrays[2][...] = reference.expected[2]
    arrays[2][10, 20] += 0.5
    message = reference.mismatch(arrays, None)
    assert message is not None and "'T_matmul'" in message and "(10, 20)" in message


def test_reference_mismatch_catches_nans_and_wrong_infinities() -> None:
    func = workload_from_spec(MATMUL)
    reference = make_reference(func, normalize_spec(MATMUL), seed=0)
    arrays = reference.fresh_arguments()
    arrays[2][...] = reference.expected[2]
    assert reference.mismatch(arrays, None) is None
    arrays[2][3, 4] = np.nan
    assert "(3, 4)" in str(reference.mismatch(arrays, None))
    arrays[2][3, 4] = np.inf
    assert "(3, 4)" in str(reference.mismatch(arrays, None))


def test_reference_mismatch_accepts_matching_infinities_only() -> None:
    func = workload_from_spec(MATMUL)
    reference = make_reference(func, normalize_spec(MATMUL), seed=0)
    expected = reference.expected[2].copy()
    expected[0, 0], expected[1, 1] = np.inf, np.nan
    special = dataclasses.replace(reference, expected={2: expected})
    arrays = reference.fresh_arguments()
    arrays[2][...] = expected
    assert special.mismatch(arrays, None) is None
    arrays[2][0, 0] = 1.0
    assert "(0, 0)" in str(special.mismatch(arrays, None))
    arrays[2][0, 0], arrays[2][1, 1] = np.inf, 1.0
    assert "(1, 1)" in str(special.mismatch(arrays, None))
    arrays[2][1, 1] = np.nan
    arrays[2][5, 6] += 0.5
    assert "(5, 6)" in str(special.mismatch(arrays, None))


# ---- the local backend ------------------------------------------------------------------


def _faulty_workers(timeout_s: float) -> Workers:
    """Local workers whose processes run the faulty builder and measurer, a build or a
    measurement cut after ``timeout_s``."""
    with pytest.MonkeyPatch.context() as patch:
        path = os.pathsep.join([TESTS_FOLDER, os.environ.get("PYTHONPATH", "")])
        patch.setenv("PYTHONPATH", path)
        return workers.create(
            "local",
            build_timeout_s=timeout_s,
            config=dataclasses.replace(TEST_CONFIG, timeout_s=timeout_s),
            build_function=BUILD_FUNCTION,
            measurer=MEASURER,
        )


@pytest.fixture(scope="module")
def local() -> Iterator[Workers]:
    """The faulty workers with deadlines no good candidate reaches on a busy machine."""
    with _faulty_workers(BUILD_TIMEOUT_S) as backend:
        yield backend


@pytest.fixture(scope="module")
def hurried() -> Iterator[Workers]:
    """The faulty workers with deadlines a hang reaches soon: the hang tests wait them
    out, and every good candidate they build and time takes well under a second."""
    with _faulty_workers(HANG_TIMEOUT_S) as backend:
        yield backend


def test_good_candidates_are_measured(local: Workers) -> None:
    candidates = [matmul_candidate(seed) for seed in range(4)] + [custom_candidate()]
    candidates.append(spec_candidate({"op": "conv2d_nchw", "args": _SMALL_CONV}))
    results = local.measure(candidates)
    for result, candidate in zip(results, candidates, strict=True):
        check_ok(result)
        assert result.candidate == candidate
        assert result.worker_host == socket.gethostname()


# The deadline of the hang tests' workers (see ``hurried``).
HANG_TIMEOUT_S = 8.0

_SMALL_CONV = {
    "batch": 1,
    "in_channels": 3,
    "height": 9,
    "width": 11,
    "out_channels": 5,
    "kernel": 3,
    "padding": 1,
}


def test_min_repeat_ms_grows_number_and_cache_flush_runs() -> None:
    config = MeasureConfig(
        repeat=2, min_repeat_ms=GROWN_LOOP_MS, flush_cache=True, flush_bytes=1 << 20
    )
    candidate = spec_candidate({"op": "relu", "args": {"shape": [31]}})
    with workers.create("local", max_workers=1, config=config) as backend:
        (result,) = backend.measure([candidate])
    check_ok(result, repeat=2)
    assert result.number > 1


def test_a_clearly_slow_candidate_is_cut_after_one_call(local: Workers) -> None:
    slow = slow_candidate()
    cut = dataclasses.replace(slow, cutoff_seconds=1e-3)
    full_result, cut_result = local.measure([slow, cut])
    check_ok(full_result)
    assert cut_result.ok, cut_result.error
    assert cut_result.candidate == cut
    assert len(cut_result.run_times) == 1 and cut_result.run_times[0] > 1e-3
    assert cut_result.number == 1


def test_one_slow_first_loop_does_not_leave_a_fast_kernel_timed_call_by_call() -> None:
    """A kernel of microseconds whose first timed call was slowed past
    ``min_repeat_ms`` (a thread pool waking, another process on the core) is timed in
    calibrated loops once a later call shows it fast: before, every repeat was one call,
    timer noise as much as kernel. ``loops`` stands in for ``time_raw`` with the times
    such a kernel gives."""
    config = MeasureConfig(repeat=3, min_repeat_ms=2.0)
    asked = []

    def loops(number: int, repeat: int, min_repeat_ms: float, *, warmup: int) -> ProfileResult:
        asked.append((number, repeat, min_repeat_ms))
        if len(asked) == 1:
            return ProfileResult((5e-3,), number)
        return ProfileResult((1e-5,) * repeat, number)

    timing = time_in_steps(loops, config, None, deadline=time.monotonic() + 60)
    paced = asked[2][0]
    assert 220 <= paced <= 221  # the calls in 2 ms at 10 us a call, 10 % over
    assert asked == [(1, 1, 0.0), (1, 1, 0.0), (paced, 1, 0.0), (paced, 2, 0.0)]
    assert timing == ProfileResult((1e-5,) * 3, paced)


def test_a_calibrating_loop_cut_short_grows_the_number_of_calls() -> None:
    """The pace of the first calls can be slower than the kernel's (its threads
    waking): a loop sized by it then ends too soon to be a repeat, and the loops grow
    from there, as ``time_raw`` calibrates."""
    config = MeasureConfig(repeat=3, min_repeat_ms=2.0)
    asked = []

    def loops(number: int, repeat: int, min_repeat_ms: float, *, warmup: int) -> ProfileResult:
        asked.append((number, repeat, min_repeat_ms))
        per_call = 1e-3 if len(asked) == 1 else 1e-5
        return ProfileResult((per_call,) * repeat, number)

    timing = time_in_steps(loops, config, None, deadline=time.monotonic() + 60)
    assert asked == [(1, 1, 0.0), (3, 1, 0.0), (3, 3, 2.0)]
    assert timing == ProfileResult((1e-5,) * 3, 3)


def test_a_slow_kernel_is_timed_call_by_call_until_its_repeats_or_deadline() -> None:
    config = MeasureConfig(repeat=3, min_repeat_ms=2.0)

    def loops(number: int, repeat: int, min_repeat_ms: float, *, warmup: int) -> ProfileResult:
        assert (number, repeat, min_repeat_ms) == (1, 1, 0.0)
        return ProfileResult((5e-3,), number)

    timing = time_in_steps(loops, config, None, deadline=time.monotonic() + 60)
    assert timing == ProfileResult((5e-3,) * 3, 1)
    assert time_in_steps(loops, config, None, deadline=time.monotonic()).results == (5e-3,)


def test_a_kernel_of_long_calls_is_timed_in_two_loops() -> None:
    """A call of a tenth of a second or more varies by under 1 % from run to run: five
    runs of a search's slow random points cost seconds each and tell nothing more."""
    config = MeasureConfig(repeat=5, min_repeat_ms=2.0)
    asked = []

    def loops(number: int, repeat: int, min_repeat_ms: float, *, warmup: int) -> ProfileResult:
        asked.append((number, repeat, min_repeat_ms))
        return ProfileResult((0.25,), number)

    timing = time_in_steps(loops, config, None, deadline=time.monotonic() + 60)
    assert timing == ProfileResult((0.25,) * LONG_CALL_RUNS, 1)
    assert asked == [(1, 1, 0.0)] * LONG_CALL_RUNS


def scripted_loops(per_call: Sequence[float], asked: list[tuple[int, int, float]]) -> Any:
    """A stand-in for ``time_raw`` whose k-th timed loop takes ``per_call[k]`` seconds
    a call (the last one from then on); it records what it was asked."""

    def loops(number: int, repeat: int, min_repeat_ms: float, *, warmup: int) -> ProfileResult:
        asked.append((number, repeat, min_repeat_ms))
        done = sum(r for _, r, _ in asked[:-1])
        times = [per_call[min(done + k, len(per_call) - 1)] for k in range(repeat)]
        return ProfileResult(tuple(times), number)

    return loops


@pytest.mark.parametrize(
    ("per_call", "runs"),
    [
        ((5e-3, 4e-3, 4e-3), 2),  # both first loops past the contender's 3 ms: an outsider
        ((5e-3, 2e-3, 2e-3), 5),  # the first loop slowed by something else: timed in full
        ((2e-3,), 5),  # a contender
    ],
)
def test_an_outsider_of_long_loops_is_timed_in_two(per_call: tuple[float, ...], runs: int) -> None:
    """Loops of single calls as long as ``min_repeat_ms``: a candidate slower than its
    ``contender_seconds`` in its first ``OUTSIDER_RUNS`` loops is timed in those."""
    config = MeasureConfig(repeat=5, min_repeat_ms=1.0)
    asked: list[tuple[int, int, float]] = []
    timing = time_in_steps(
        scripted_loops(per_call, asked),
        config,
        1.0,
        deadline=time.monotonic() + 60,
        contender_seconds=3e-3,
    )
    assert len(timing.results) == runs
    assert asked == [(1, 1, 0.0)] * runs


@pytest.mark.parametrize(
    ("per_call", "runs"),
    [
        ((1e-4, 1.5e-4, 1.4e-4), 2),  # both calibrated loops past the contender's 120 us
        ((1e-4, 1.5e-4, 1e-4), 5),  # the first calibrated loop slowed: timed in full
        ((1e-4,), 5),  # a contender
    ],
)
def test_an_outsider_of_short_calls_is_timed_in_two_calibrated_loops(
    per_call: tuple[float, ...], runs: int
) -> None:
    """A kernel of short calls is timed in loops of many calls (``number``); an
    outsider in two of them, as a kernel of long calls in two loops of one."""
    config = MeasureConfig(repeat=5, min_repeat_ms=2.0)
    asked: list[tuple[int, int, float]] = []
    timing = time_in_steps(
        scripted_loops(per_call, asked),
        config,
        None,
        deadline=time.monotonic() + 60,
        contender_seconds=1.2e-4,
    )
    assert timing.results == tuple(per_call[min(k, len(per_call) - 1)] for k in range(1, runs + 1))
    assert asked[0] == (1, 1, 0.0)
    assert {number for number, _, _ in asked[1:]} == {22}  # 2 ms at 100 us a call, 10 % over
    assert sum(repeat for _, repeat, _ in asked[1:]) == runs


@pytest.mark.parametrize(
    ("per_call", "results"),
    [
        ((12e-3, 2e-3), (2e-3,) * 5),  # one stalled call: timed in full
        ((12e-3, 13e-3, 2e-3), (2e-3,) * 5),  # two stalled calls in a row: still in full
        ((12e-3, 11e-3), (11e-3,)),  # past the cutoff on every call: cut, one run kept
        ((0.2,), (0.2,)),  # too long to be a stall: cut at once
    ],
)
def test_one_call_past_the_cutoff_cuts_only_when_the_next_is_too(
    per_call: tuple[float, ...], results: tuple[float, ...]
) -> None:
    """A call past the cutoff is cut only when it is too long to be a stall (a vCPU
    descheduled for 12 ms once cut a kernel of microseconds, two such calls in a row
    another), or the next STALL_CALLS calls are past it as well."""
    config = MeasureConfig(repeat=5, min_repeat_ms=1.0)
    asked: list[tuple[int, int, float]] = []
    timing = time_in_steps(
        scripted_loops(per_call, asked), config, 10e-3, deadline=time.monotonic() + 60
    )
    assert timing.results == results


def test_without_a_contender_bound_every_candidate_is_timed_in_full() -> None:
    config = MeasureConfig(repeat=5, min_repeat_ms=1.0)
    asked: list[tuple[int, int, float]] = []
    timing = time_in_steps(
        scripted_loops((5e-3,), asked), config, None, deadline=time.monotonic() + 60
    )
    assert timing.results == (5e-3,) * 5


def test_a_kernel_of_microseconds_is_timed_in_full_whatever_its_cutoff() -> None:
    """A call of a few microseconds is start-up as much as kernel when it is timed
    alone (a fresh library's first parallel call takes milliseconds): a cutoff below
    it must not cut it on that call, or the search stores a time thousands of times
    its real one and never sees the schedule again."""
    config = MeasureConfig(repeat=3, min_repeat_ms=GROWN_LOOP_MS)
    tiny = dataclasses.replace(matmul_candidate(1), cutoff_seconds=1e-9)
    with workers.create("local", max_workers=1, config=config) as backend:
        (result,) = backend.measure([tiny])
    check_ok(result, repeat=3)
    assert result.number > 1


def test_a_wrong_result_with_a_cutoff_is_still_an_error(local: Workers) -> None:
    wrong = swapped_artifact(local.builder)
    candidate = dataclasses.replace(wrong.candidate, cutoff_seconds=1e-9)
    (result,) = local.runner.run([dataclasses.replace(wrong, candidate=candidate)])
    assert result.error_kind is ErrorKind.WRONG_RESULT


def test_repeats_that_would_pass_the_deadline_are_not_timed(local: Workers) -> None:
    """A candidate whose repeats would not fit in ``timeout_s`` comes back measured with
    the repeats that fit, not as a timeout. A deadline already passed leaves the first."""
    (build,) = local.builder.build([matmul_candidate(5)])
    measurer = Measurer(host="here")
    config = MeasureConfig(repeat=3, min_repeat_ms=0.0)
    assert len(measurer.measure(build, config).run_times) == 3
    hurried = dataclasses.replace(config, timeout_s=1e-9)
    result = measurer.measure(build, hurried)
    assert result.ok and len(result.run_times) == 1


def _children_environments(role: str) -> list[dict[str, str]]:
    """The environments of this process's ``workers.child`` children of ``role``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            status = (proc / "status").read_text()
            command = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        parent = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid"))
        if int(parent) == os.getpid() and command[1:4] == [b"-m", b"workers.child", role.encode()]:
            pairs = (entry.decode().partition("=") for entry in environ if entry)
            found.append({name: value for name, _, value in pairs})
    return found


def test_the_runner_keeps_numpy_to_one_blas_thread(local: Workers) -> None:
    """The runner computes references with numpy; BLAS threads left spinning after that
    would share the cores with the kernel being timed (it ran up to 6x slower)."""
    check_ok(local.measure([matmul_candidate(0)])[0])
    (runner,) = _children_environments("run")
    assert runner["OPENBLAS_NUM_THREADS"] == "1" and runner["MKL_NUM_THREADS"] == "1"
    builders = _children_environments("build")
    inherited = os.environ.get("OPENBLAS_NUM_THREADS")
    assert builders and all(env.get("OPENBLAS_NUM_THREADS") == inherited for env in builders)


def test_runner_process_is_replaced_after_its_quota() -> None:
    with workers.create("local", config=TEST_CONFIG, candidates_per_process=2) as backend:
        results = backend.measure([matmul_candidate(seed) for seed in range(5)])
    for result in results:
        check_ok(result)


def test_illegal_or_malformed_traces_are_build_errors(local: Workers) -> None:
    malformed = dataclasses.replace(matmul_candidate(), trace="{not json")
    results = local.measure([illegal_candidate(), malformed, matmul_candidate()])
    assert kinds(results) == [ErrorKind.BUILD_ERROR, ErrorKind.BUILD_ERROR, None]
    assert "ScheduleError" in results[0].error and "'C'" in results[0].error
    assert "does not parse" in results[1].error


def test_reference_check_catches_a_wrong_library(local: Workers) -> None:
    (result,) = local.runner.run([swapped_artifact(local.builder)])
    assert result.error_kind is ErrorKind.WRONG_RESULT
    assert "'T_add'" in result.error and "numpy add" in result.error


def test_a_library_that_does_not_fit_its_arguments_is_a_run_error(local: Workers) -> None:
    (result,) = local.runner.run([swapped_artifact(local.builder, shape_b=(9,))])
    assert result.error_kind is ErrorKind.RUN_ERROR
    assert "RuntimeArgumentError" in result.error


def test_spec_that_does_not_describe_the_workload_is_a_run_error(local: Workers) -> None:
    other = {"op": "matmul", "args": {"m": 67, "n": 45, "k": 35}}
    candidate = dataclasses.replace(matmul_candidate(), spec=json.dumps(other))
    (result,) = local.measure([candidate])
    assert result.error_kind is ErrorKind.RUN_ERROR and "does not describe" in result.error


def test_runner_crash_costs_one_record_and_the_next_runs(local: Workers) -> None:
    candidates = [matmul_candidate(2), matmul_candidate(2, Fault.CRASH), matmul_candidate(3)]
    results = local.measure(candidates)
    assert kinds(results) == [None, ErrorKind.CRASHED, None]
    assert "SIGSEGV" in results[1].error
    check_ok(results[2])


def test_runner_hang_times_out_and_the_next_runs(hurried: Workers) -> None:
    candidates = [matmul_candidate(0, Fault.HANG), matmul_candidate(0)]
    results = hurried.runner.run(hurried.builder.build(candidates))
    assert kinds(results) == [ErrorKind.TIMEOUT, None]
    assert f"{HANG_TIMEOUT_S:g} s" in results[0].error


def test_ctrl_c_while_the_runner_is_busy_leaves_no_late_reply(
    local: Workers, tmp_path: Path
) -> None:
    """Ctrl-C lands while the runner process measures (it waits, paused, until the
    interrupt has been delivered); the next candidate still gets its own result."""
    paused, after = matmul_candidate(1, Fault.PAUSE, str(tmp_path)), matmul_candidate(3)
    paused_build, after_build = local.builder.build([paused, after])
    started = tmp_path / f"started-{socket.gethostname()}"

    def interrupt_then_release() -> None:
        wait_for(started)
        os.kill(os.getpid(), signal.SIGINT)

    interrupter = threading.Thread(target=interrupt_then_release)
    interrupter.start()
    with pytest.raises(KeyboardInterrupt):
        local.runner.run([paused_build])
    interrupter.join()
    (tmp_path / "release").touch()
    (result,) = local.runner.run([after_build])
    check_ok(result)
    assert result.candidate == after


def test_builder_crash_and_hang_cost_one_record_each(hurried: Workers) -> None:
    candidates = [
        matmul_candidate(0, Fault.BUILD_CRASH),
        matmul_candidate(1),
        matmul_candidate(0, Fault.BUILD_HANG),
        matmul_candidate(2),
        matmul_candidate(3),
    ]
    builds = hurried.builder.build(candidates)
    assert kinds(builds) == [ErrorKind.CRASHED, None, ErrorKind.TIMEOUT, None, None]
    assert "SIGSEGV" in builds[0].error
    results = hurried.runner.run(builds)
    assert kinds(results) == kinds(builds)
    assert all(hurried.builder.build([matmul_candidate(4)])[0].ok for _ in range(2))


def test_the_default_workers_have_no_fault_switch() -> None:
    """A fault annotation is an ordinary annotation to the production builder and
    measurer: nothing a trace says can make them misbehave."""
    candidates = [matmul_candidate(1, Fault.CRASH), matmul_candidate(1, Fault.BUILD_CRASH)]
    with workers.create("local", config=TEST_CONFIG) as backend:
        results = backend.measure(candidates)
    for result in results:
        check_ok(result)


def test_results_become_database_records(local: Workers, tmp_path: Any) -> None:
    from db import SQLDatabase
    from tuner.measurement import to_measurement

    cut = dataclasses.replace(slow_candidate(), cutoff_seconds=1e-3)
    candidates = [matmul_candidate(1), matmul_candidate(2, Fault.CRASH), cut]
    results = local.measure(candidates)
    with SQLDatabase(f"sqlite:///{tmp_path / 'tuning.db'}") as database:
        database.commit_workload(MATMUL)
        database.commit_workload(workload_from_json(cut.workload))
        assert database.commit_records(to_measurement(r) for r in results) == 3
        stored = {
            (record.error_kind, len(record.run_times)): record for record in database.records()
        }
    assert set(stored) == {(None, TEST_CONFIG.repeat), (ErrorKind.CRASHED, 0), (None, 1)}
    assert stored[None, TEST_CONFIG.repeat].run_times == results[0].run_times
    assert stored[None, 1].run_times == results[2].run_times
    assert "SIGSEGV" in (stored[ErrorKind.CRASHED, 0].error or "")


def test_cold_weights_times_a_model_kernel_call_by_call_with_its_weights_evicted(
    local: Workers,
) -> None:
    """With ``cold_weights``, a workload that marks constant weights (a model's kernel)
    is timed in single calls, each after the weights were evicted from the caches;
    without, in calibrated loops like any other."""
    func = mark_layout_free(workload_from_spec(MATMUL), ["B"])
    assert make_reference(func, None, seed=0).weights == (1,)
    (build,) = local.builder.build([Candidate.make(func, Schedule(func).trace)])
    measurer = Measurer(host="here")
    config = MeasureConfig(repeat=4, min_repeat_ms=GROWN_LOOP_MS)
    cold = measurer.measure(build, dataclasses.replace(config, cold_weights=True))
    assert cold.ok, cold.error
    assert cold.number == 1 and len(cold.run_times) == 4
    warm = measurer.measure(build, dataclasses.replace(config, cold_weights=False))
    assert warm.ok, warm.error
    assert warm.number > 1


def test_a_candidate_built_for_instructions_this_host_lacks_is_a_run_error(
    local: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner refuses a library built for features its host lacks (here: told it
    lacks AVX-512F, as an AVX2 host does) with a record naming them, before loading
    it: called, it would end the runner with an illegal instruction."""
    func = workload_from_spec(MATMUL)
    candidate = Candidate.make(func, Schedule(func).trace, target="llvm -mcpu=skylake-avx512")
    (build,) = local.builder.build([candidate])
    assert build.artifact is not None, build.error
    lacks = {"skylake-avx512": ("+avx512f",)}  # the reference still builds for the host
    monkeypatch.setattr(compiler.target.llvm, "host_lacks", lambda t: lacks.get(t.cpu, ()))
    result = Measurer(host="here").measure(build, MeasureConfig(repeat=1))
    assert result.error_kind is ErrorKind.RUN_ERROR
    assert "cannot run it here" in (result.error or "") and "+avx512f" in (result.error or "")
