"""Checking and timing one built candidate, inside a runner process or actor.

A ``Measurer`` lives as long as its process: it keeps each workload's reference
(inputs and expected outputs) so the reference is computed once per workload, and
a buffer to flush caches with. Its two steps are separate calls so that the
caller can give each its own deadline: ``prepare`` (the reference, once per
workload) and ``measure`` (load, check, time).
"""

from __future__ import annotations

import json
import math
import os
import resource
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

import numpy as np

from compiler.errors import ErrorKind
from compiler.runtime import Module, load_module
from compiler.runtime.cache_eviction import evict_from_caches
from compiler.runtime.prepacked import pack_arguments
from compiler.runtime.profiling import ProfileResult, time_raw
from compiler.target.llvm import unrunnable_here
from compiler.workload.key import workload_from_json, workload_key
from compiler.workload.spec import normalize_spec, workload_from_spec
from workers.base import BuildResult, Candidate, MeasureConfig, RunResult
from workers.check import Reference, make_reference

# A timed repeat starts only if, at the pace of the loop before it, it ends within this
# share of ``timeout_s`` from the start of the measurement. The rest is slack for a loop
# slower than the last and for the reply, so a candidate slow enough to pass the deadline
# with all its repeats comes back measured, with fewer run times, instead of as a timeout.
TIMING_SHARE = 0.5
# A candidate is cut off (``Candidate.cutoff_seconds``) only on a call long enough for its
# time to be the kernel's. The call that checks the outputs is the library's first, and
# pays its start-up: the first parallel call of a freshly loaded library took 5-8 ms for
# a matmul of 1.3 us, which a cutoff of ten times the best (13 us) cut, storing 4,000
# times its real time. A single call after the check waits for the parallel threads to
# wake (tens of microseconds), or now and then for a descheduled vCPU (milliseconds: a
# 3 us dense once stored at 4 ms). A faster kernel is timed in full, which costs about
# ``repeat`` loops of ``min_repeat_ms``; the cutoff is there for the slow ones.
COLD_CUT_SECONDS = 0.1
# The calls that confirm a cut under COLD_CUT_SECONDS (``time_in_steps``).
STALL_CALLS = 3
# The arrays a runner keeps of its workloads' references: every task of ResNet-18 or
# a BERT layer fits several times over.
REFERENCE_BYTES = 512 << 20
WARM_CUT_SECONDS = 0.01
# A call at least this long is timed in at most ``LONG_CALL_RUNS`` loops: its runs differ
# by under 1 % (GEMM 1024^3 candidates of 0.14-2.5 s a call on Zen 4: the fastest of two
# within 0.9 % of the fastest of five), and a search's first batch of random points is
# full of them (a 64-trial GEMM search spent 40 % of its time timing ten such points,
# 30-150 times slower than its best).
LONG_CALL_SECONDS = 0.1
LONG_CALL_RUNS = 2
# A candidate slower than its ``contender_seconds`` in each of its first this many timed
# loops is timed in those only: one loop slowed by something else does not cut a
# contender short, and an outsider's fastest of two is as good a number for a cost
# model as its fastest of five. In 64-trial searches of GEMM 1024^3 and conv2d NCHW on
# ``-mcpu=znver4``, the candidates between 1.25 and 3 times the best so far took 40 % of
# the time spent in timed loops.
OUTSIDER_RUNS = 2
# ``settle``'s untimed calls after the check: until SETTLED_CALLS in a row take no page
# fault, at most SETTLE_CALLS, and none started after SETTLE_SECONDS.
SETTLED_CALLS = 3
SETTLE_CALLS = 20
SETTLE_SECONDS = 0.05


class Measurer:
    """``host`` names where results were measured. Workloads' references are kept up
    to ``reference_bytes`` of arrays (least recently used first out; the newest is
    always kept): a model's tuning visits its tasks in turn, and a reference is a build
    and a run of the unscheduled workload (0.2 s for a ResNet-18 convolution).

    A backend makes its measurer from a "module:attribute" name (``MEASURER``
    unless told otherwise), so a subclass can stand in for it, e.g. in tests."""

    def __init__(self, *, host: str, reference_bytes: int = REFERENCE_BYTES) -> None:
        self.host = host
        self.reference_bytes = reference_bytes
        self._references: OrderedDict[str, Reference | str] = OrderedDict()
        self._flush_buffer: np.ndarray | None = None

    def prepare(self, candidate: Candidate, config: MeasureConfig) -> str | None:
        """Compute (or find) the reference of the candidate's workload; returns why it
        cannot be computed, or None. A failure is kept too, so the workload's other
        candidates get the same answer at once."""
        key = candidate.reference_key
        if key in self._references:
            self._references.move_to_end(key)
        else:
            self._references[key] = _reference_or_reason(candidate, config.seed)
            kept = sum(_nbytes(r) for r in self._references.values())
            while kept > self.reference_bytes and len(self._references) > 1:
                kept -= _nbytes(self._references.popitem(last=False)[1])
        found = self._references[key]
        return found if isinstance(found, str) else None

    def reference_for(self, build: BuildResult, config: MeasureConfig) -> Reference | RunResult:
        """The reference ``build``'s outputs are checked against, or the result that
        ends its measurement first (it did not build; its reference cannot be made)."""
        candidate = build.candidate
        if build.artifact is None:
            return RunResult.from_build(build)
        reason = self.prepare(candidate, config)
        if reason is not None:
            return self._failed(candidate, ErrorKind.RUN_ERROR, reason)
        reference = self._references[candidate.reference_key]
        assert isinstance(reference, Reference)
        return reference

    def measure(self, build: BuildResult, config: MeasureConfig) -> RunResult:
        """Load the artifact, run it once and check its outputs, then time it (with
        fewer repeats when the candidate's cutoff or the deadline says so; not at all
        when the checked run already took longer than the cutoff: that run is the
        measurement)."""
        started = time.monotonic()
        candidate = build.candidate
        reference = self.reference_for(build, config)
        if isinstance(reference, RunResult):
            return reference
        assert build.artifact is not None
        unrunnable = unrunnable_here(candidate.target)
        if unrunnable is not None:  # loaded and called, it would kill this process
            return self._failed(candidate, ErrorKind.RUN_ERROR, f"cannot run it here: {unrunnable}")
        try:
            functions = _load(build.artifact.library)
            function = functions[build.artifact.function]
            # Constant weights are converted once, before the check and the timing.
            arrays = pack_arguments(functions, function.name, reference.fresh_arguments())
            check_started = time.perf_counter()
            function(*arrays)
            check_seconds = time.perf_counter() - check_started
            mismatch = reference.mismatch(arrays, config.tolerance)
            if mismatch is not None:
                return self._failed(candidate, ErrorKind.WRONG_RESULT, mismatch)
            cutoff = _warm_cutoff(candidate.cutoff_seconds)
            if cutoff is not None and check_seconds > max(cutoff, COLD_CUT_SECONDS):
                # Already past the cutoff cold: timing it warm would not make it a contender.
                return RunResult(candidate, (check_seconds,), 1, worker_host=self.host)
            weights = [arrays[k] for k in reference.weights] if config.cold_weights else []
            bound = function.signature.bind(arrays)
            settle(function.raw, bound)
            loops = partial(
                time_raw, function.raw, bound, before_repeat=self._before_repeat(config, weights)
            )
            timing = time_in_steps(
                loops,
                replace(config, number=1, min_repeat_ms=0.0) if weights else config,
                cutoff,
                deadline=started + TIMING_SHARE * config.timeout_s,
                contender_seconds=candidate.contender_seconds,
            )
        except Exception as err:  # one candidate's failure is its record
            return self._failed(candidate, ErrorKind.RUN_ERROR, f"{type(err).__name__}: {err}")
        return RunResult(candidate, timing.results, timing.number, worker_host=self.host)

    def _failed(self, candidate: Candidate, kind: ErrorKind, message: str) -> RunResult:
        return RunResult.failed(candidate, kind, message, self.host)

    def _before_repeat(
        self, config: MeasureConfig, weights: list[np.ndarray]
    ) -> Callable[[], None] | None:
        """What runs before each timed repeat: a cache flush when the config asks (which
        evicts the weights too), else the eviction of the weights it was given."""
        if config.flush_cache:
            return partial(self._flush, config.flush_bytes)
        if weights:
            return partial(evict_from_caches, weights)
        return None

    def _flush(self, nbytes: int) -> None:
        """Write over a buffer larger than the caches, so the next run starts cold."""
        size = max(nbytes // 8, 1)
        if self._flush_buffer is None or self._flush_buffer.size != size:
            self._flush_buffer = np.zeros(size, dtype=np.float64)
        self._flush_buffer += 1.0


def settle(kernel: Callable[..., None], args: Sequence[object]) -> None:
    """Call ``kernel`` on ``args``, untimed, until ``SETTLED_CALLS`` calls in a row take
    no page fault, at most ``SETTLE_CALLS`` times and none started after
    ``SETTLE_SECONDS``.

    A kernel allocates its large temporaries (a Winograd convolution's transformed
    tiles) on every call and frees them on return. In a process's first calls of such a
    kernel the C library's heap is still growing around them, and now and then a call
    writes to pages the process has never touched: one fault per 4 KiB page. When that
    ends depends on what the process allocated before. ResNet-18's Winograd bests on
    ``-mcpu=znver4`` took 1,500-7,000 faults a measurement (a check call and five timed
    ones) in one runner process, none in another, and timed up to 1.8x slower there.
    In a model a kernel runs thousands of times, past that, so it is timed past it.
    (``compiler.runtime.heap`` keeps the faults from coming back later.)"""
    started = time.perf_counter()
    quiet = 0
    for _ in range(SETTLE_CALLS):
        faults = _page_faults()
        kernel(*args)
        quiet = quiet + 1 if _page_faults() == faults else 0
        if quiet == SETTLED_CALLS or time.perf_counter() - started > SETTLE_SECONDS:
            return


def _page_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _warm_cutoff(cutoff_seconds: float | None) -> float | None:
    """The cutoff a warm call is judged by: never below ``WARM_CUT_SECONDS``."""
    return None if cutoff_seconds is None else max(cutoff_seconds, WARM_CUT_SECONDS)


def time_in_steps(
    loops: Callable[..., ProfileResult],
    config: MeasureConfig,
    cutoff_seconds: float | None,
    *,
    deadline: float,
    contender_seconds: float | None = None,
) -> ProfileResult:
    """Time as ``time_raw`` does (``loops`` is it, given the kernel and its arguments),
    in steps that can stop early. First one timed loop of ``config.number`` calls after
    the warmup: when a call of it took longer than ``cutoff_seconds`` (and, when it
    took under COLD_CUT_SECONDS, each of STALL_CALLS more), that loop is the whole
    measurement; the stalled calls past it are dropped otherwise. A loop as
    long as ``min_repeat_ms`` is the first repeat, and each further one starts only if,
    at the pace of the fastest loop yet, it ends before ``deadline``. A shorter loop
    says the kernel is fast: ``time_raw`` then grows ``number`` and times every repeat,
    which takes about ``repeat`` times ``min_repeat_ms``. So does a later loop that is
    that short: the first was slowed by something else (a thread pool waking, another
    process), and one slow call must not leave a kernel of microseconds timed call by
    call. A kernel whose calls take ``LONG_CALL_SECONDS`` stops at ``LONG_CALL_RUNS``,
    one slower than ``contender_seconds`` in its first ``OUTSIDER_RUNS`` loops at those."""
    first = loops(config.number, 1, 0.0, warmup=config.warmup)
    (per_call,) = first.results
    if cutoff_seconds is not None and per_call > cutoff_seconds:
        if per_call >= COLD_CUT_SECONDS:
            return first
        # Under COLD_CUT_SECONDS, a call past the cutoff may be a stall (one call of
        # 12 ms, while another process had the core, cut a matmul of microseconds; in
        # CI so did two in a row, 13 ms each): cut when the fastest of STALL_CALLS
        # more calls is past it too.
        first = loops(config.number, STALL_CALLS, 0.0, warmup=0)
        if min(first.results) > cutoff_seconds:
            return ProfileResult((min(first.results),), first.number)  # a cut keeps one run
        first = ProfileResult(tuple(r for r in first.results if r <= cutoff_seconds), first.number)
    results = list(first.results)
    while True:
        fastest = min(results)
        loop_seconds = fastest * first.number
        if loop_seconds * 1e3 < config.min_repeat_ms:
            return _time_in_calibrated_loops(loops, config, fastest, contender_seconds)
        enough = config.repeat
        if fastest >= LONG_CALL_SECONDS:
            enough = min(enough, LONG_CALL_RUNS)
        if contender_seconds is not None and fastest > contender_seconds:
            enough = min(enough, OUTSIDER_RUNS)
        if len(results) >= enough or time.monotonic() + loop_seconds >= deadline:
            return ProfileResult(tuple(results), first.number)
        results.extend(loops(first.number, 1, 0.0, warmup=0).results)


def _time_in_calibrated_loops(
    loops: Callable[..., ProfileResult],
    config: MeasureConfig,
    per_call: float,
    contender_seconds: float | None,
) -> ProfileResult:
    """``config.repeat`` loops of at least ``min_repeat_ms``, of as many calls as take
    that long (with 10 % to spare) at ``per_call``, the pace met so far. When the first
    such loop is as long as that, it is the first repeat; when it is shorter (the pace
    met was slowed), ``loops`` grows ``number`` from there. ``OUTSIDER_RUNS`` loops when
    each is slower than ``contender_seconds``."""
    paced = math.ceil(config.min_repeat_ms * 1e-3 / max(per_call, 1e-9) * 1.1)
    number = max(config.number, paced)
    first = loops(number, 1, 0.0, warmup=0)
    if first.results[0] * number * 1e3 < config.min_repeat_ms:
        return loops(number, config.repeat, config.min_repeat_ms, warmup=0)
    results = first.results
    if contender_seconds is not None and results[0] > contender_seconds:
        more = min(OUTSIDER_RUNS, config.repeat) - 1
        if more:
            results += loops(number, more, 0.0, warmup=0).results
        if min(results) > contender_seconds:
            return ProfileResult(results, number)
    if len(results) < config.repeat:
        results += loops(number, config.repeat - len(results), 0.0, warmup=0).results
    return ProfileResult(results, number)


def _nbytes(reference: Reference | str) -> int:
    """The bytes a kept reference (or the reason it has none) holds."""
    if isinstance(reference, str):
        return len(reference)
    arrays = (*reference.arguments, *reference.expected.values())
    return sum(a.nbytes for a in arrays)


def _reference_or_reason(candidate: Candidate, seed: int) -> Reference | str:
    try:
        func = workload_from_json(candidate.workload)
        spec = None
        if candidate.spec is not None:
            spec = normalize_spec(json.loads(candidate.spec))
            if workload_key(workload_from_spec(spec)) != workload_key(func):
                return (
                    f"the candidate's spec {candidate.spec} does not describe its workload "
                    "(their workload keys differ); send the spec the workload was made from, "
                    "or none"
                )
        return make_reference(func, spec, seed)
    except Exception as err:  # reported on every candidate of the workload
        return f"no reference outputs for the workload: {type(err).__name__}: {err}"


def _load(library: bytes) -> Module:
    """The functions of library bytes. The file is removed once loaded: the loaded
    library stays mapped, and nothing is left behind if the process dies later."""
    fd, path = tempfile.mkstemp(prefix="tensortune-run-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(library)
        return load_module(path)
    finally:
        os.unlink(path)
