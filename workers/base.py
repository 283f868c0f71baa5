"""The workers' interface: candidates in, build and run results out, all plain data.

A ``Builder`` turns candidates (workload JSON + trace JSON + target) into shared
libraries; a ``Runner`` checks and times them. Everything that crosses a process
or a host is one of the frozen dataclasses below, converted to JSON (and, for a
library, raw bytes), so a backend can run the work anywhere without pickling
compiler objects. A failure is a value: an ``ErrorKind`` (``compiler.errors``, shared
with the tuner and the database) and a non-empty message, never an exception that
loses the candidate.
"""

from __future__ import annotations

import abc
import hashlib
import importlib
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compiler.errors import ErrorKind
from workers.build_ahead import BuildsAhead
from workers.build_cache import BuildCache
from workers.tally import WorkTally

if TYPE_CHECKING:
    from compiler.ir.function import PrimFunc
    from compiler.schedule.trace import Trace


class WorkersError(RuntimeError):
    """A backend cannot be set up or used as asked (no such kind, no matching host)."""


# The code a worker process runs, named "module:attribute" so that the name crosses a
# process as text and the process imports it: a function ``Candidate -> BuildResult``,
# and a class made with ``host=`` whose objects ``prepare`` and ``measure`` candidates
# (``GPU_MEASURER`` for candidates of a cuda target, in a process that holds a GPU).
# A backend takes other names in their place, e.g. a subclass a test makes misbehave.
BUILD_FUNCTION = "workers.compile_candidate:build_candidate"
MEASURER = "workers.measure:Measurer"
GPU_MEASURER = "workers.gpu_measure:GPUMeasurer"


def load_hook(name: str) -> Any:
    """The object a "module:attribute" name (``BUILD_FUNCTION``, ``MEASURER``) names."""
    module_name, colon, attribute = name.partition(":")
    if not colon or not module_name or not attribute:
        raise WorkersError(f'{name!r} is not a "module:attribute" name; e.g. {BUILD_FUNCTION!r}')
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise WorkersError(
            f"cannot import {module_name!r} (from {name!r}): {err}; put its folder on "
            "PYTHONPATH where the workers run"
        ) from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise WorkersError(f"module {module_name!r} has no {attribute!r} (from {name!r})") from None


@dataclass(frozen=True)
class Candidate:
    """One schedule to measure: the workload (``compiler.workload.key.workload_to_json``
    text), the trace (``Trace.to_json_string`` text) and the target string.

    ``spec`` is the operator spec the workload came from (JSON text), when it came
    from one: the runner then checks results against numpy instead of against the
    unscheduled build, after checking that the spec really gives this workload.

    ``cutoff_seconds``, when set, lets the runner stop timing after its first timed loop
    if a call of it took longer (or not start, when the run that checks the outputs
    took longer): the result then has that one run time. A tuner sets it
    to a multiple of the best time so far, so a candidate that is clearly slower costs
    one timed loop instead of ``repeat`` of them; its output is checked all the same.
    A CPU runner cuts only calls long enough to be the kernel's time rather than its
    start-up (``workers.measure.WARM_CUT_SECONDS``, ``COLD_CUT_SECONDS``).

    ``contender_seconds``, when set, is the slowest a contender for the best can be: a
    CPU runner times a candidate whose fastest of its first ``OUTSIDER_RUNS`` timed
    loops is slower in those loops only (``workers.measure``). A tuner sets it a little
    above the best time so far: the repeats that make a time precise are spent where
    the precision decides something.
    """

    workload: str
    trace: str
    target: str = "llvm"
    spec: str | None = None
    cutoff_seconds: float | None = None
    contender_seconds: float | None = None

    def __post_init__(self) -> None:
        for name in ("workload", "trace", "target"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(
                    f"Candidate.{name} must be JSON text (str), got "
                    f"{type(getattr(self, name)).__name__}; use Candidate.make for objects"
                )
        if self.spec is not None and not isinstance(self.spec, str):
            raise TypeError(f"Candidate.spec must be JSON text or None, got {type(self.spec)}")
        for name in ("cutoff_seconds", "contender_seconds"):
            seconds = getattr(self, name)
            if seconds is not None and (
                isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0
            ):
                raise ValueError(
                    f"Candidate.{name} must be a positive number of seconds or None (none), "
                    f"got {seconds!r}"
                )

    @staticmethod
    def make(
        func: PrimFunc | str,
        trace: Trace | str,
        target: str = "llvm",
        spec: Mapping[str, Any] | None = None,
    ) -> Candidate:
        """A candidate from a workload PrimFunc and a Trace (or their JSON already)."""
        from compiler.workload.key import workload_to_json

        workload = func if isinstance(func, str) else workload_to_json(func)
        trace_text = trace if isinstance(trace, str) else trace.to_json_string()
        spec_text = None if spec is None else json.dumps(spec, sort_keys=True)
        return Candidate(workload, trace_text, target, spec_text)

    @property
    def reference_key(self) -> str:
        """Names what the reference outputs depend on (the workload text and the spec),
        for a runner's cache; cheap, and not the canonical workload key."""
        text = self.workload + "\0" + (self.spec or "")
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "trace": self.trace,
            "target": self.target,
            "spec": self.spec,
            "cutoff_seconds": self.cutoff_seconds,
            "contender_seconds": self.contender_seconds,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Candidate:
        return Candidate(
            data["workload"],
            data["trace"],
            data["target"],
            data.get("spec"),
            data.get("cutoff_seconds"),
            data.get("contender_seconds"),
        )


@dataclass(frozen=True)
class Artifact:
    """A built candidate: the shared library's bytes (for a cuda target, its
    GPUBinary's JSON: ``workers.gpu_measure.encode_binary``), the function to call in
    it and that function's signature (``FuncSignature.to_json`` as text)."""

    library: bytes
    function: str
    signature: str


def _check_outcome(owner: str, has_value: bool, kind: ErrorKind | None, error: str | None) -> None:
    if has_value == (kind is not None) or (kind is None) != (error is None):
        raise ValueError(
            f"{owner} holds either a value or an error kind with a message, never both or "
            f"neither; got value={has_value}, error_kind={kind}, error={error!r}"
        )
    if error is not None and not error.strip():
        raise ValueError(f"{owner}: a {kind} failure needs a message saying what went wrong")


@dataclass(frozen=True)
class BuildResult:
    """A candidate and either its artifact or why it could not be built."""

    candidate: Candidate
    artifact: Artifact | None = None
    error_kind: ErrorKind | None = None
    error: str | None = None
    seconds: float = 0.0

    def __post_init__(self) -> None:
        _check_outcome("BuildResult", self.artifact is not None, self.error_kind, self.error)

    @property
    def ok(self) -> bool:
        return self.artifact is not None

    @staticmethod
    def failed(
        candidate: Candidate, kind: ErrorKind, error: str, seconds: float = 0.0
    ) -> BuildResult:
        return BuildResult(candidate, None, kind, error, seconds)

    def header(self) -> dict[str, Any]:
        """JSON for everything but the library bytes, which travel beside it."""
        artifact = self.artifact
        return {
            "candidate": self.candidate.to_json(),
            "function": None if artifact is None else artifact.function,
            "signature": None if artifact is None else artifact.signature,
            "error_kind": None if self.error_kind is None else self.error_kind.value,
            "error": self.error,
            "seconds": self.seconds,
        }

    @staticmethod
    def from_header(header: Mapping[str, Any], library: bytes | None) -> BuildResult:
        candidate = Candidate.from_json(header["candidate"])
        if header["error_kind"] is not None:
            kind = ErrorKind(header["error_kind"])
            return BuildResult.failed(candidate, kind, header["error"], header["seconds"])
        if library is None:
            raise WorkersError("a successful build result arrived without its library bytes")
        artifact = Artifact(library, header["function"], header["signature"])
        return BuildResult(candidate, artifact, seconds=header["seconds"])


@dataclass(frozen=True)
class RunResult:
    """A candidate and either its run times (seconds per call, one per repeat, each the
    mean of ``number`` calls) or why it has none. ``worker_host`` says where it ran.
    Fewer run times than the config's ``repeat`` mean the runner stopped timing early:
    a call passed the candidate's ``cutoff_seconds``, or more repeats would not have
    fitted in ``timeout_s``."""

    candidate: Candidate
    run_times: tuple[float, ...] = ()
    number: int = 0
    error_kind: ErrorKind | None = None
    error: str | None = None
    worker_host: str = ""

    def __post_init__(self) -> None:
        _check_outcome("RunResult", bool(self.run_times), self.error_kind, self.error)

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def seconds(self) -> float | None:
        """Seconds per call: the fastest repeat. Interference on a shared host only ever
        slows a repeat, so the fastest one is what a second measurement reproduces
        (under background load one kernel measured twelve times spread 0.3 % by this
        statistic and 9 % by the median of the same repeats)."""
        return min(self.run_times) if self.run_times else None

    @staticmethod
    def failed(
        candidate: Candidate, kind: ErrorKind, error: str, worker_host: str = ""
    ) -> RunResult:
        return RunResult(candidate, (), 0, kind, error, worker_host)

    @staticmethod
    def from_build(build: BuildResult) -> RunResult:
        """The record of a candidate that never reached a runner."""
        assert build.error_kind is not None and build.error is not None
        return RunResult.failed(build.candidate, build.error_kind, build.error)

    def to_json(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate.to_json(),
            "run_times": list(self.run_times),
            "number": self.number,
            "error_kind": None if self.error_kind is None else self.error_kind.value,
            "error": self.error,
            "worker_host": self.worker_host,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> RunResult:
        kind = data["error_kind"]
        return RunResult(
            Candidate.from_json(data["candidate"]),
            tuple(float(t) for t in data["run_times"]),
            int(data["number"]),
            None if kind is None else ErrorKind(kind),
            data["error"],
            data["worker_host"],
        )


# The environment of a runner's process. It computes references with numpy, whose BLAS
# threads keep spinning on every core for a while after each call: a kernel timed then
# ran several times slower than it is. With one BLAS thread the cores are the kernel's.
RUNNER_ENV = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@dataclass(frozen=True, kw_only=True)
class MeasureConfig:
    """How a runner times a candidate.

    After the call whose outputs are checked, ``warmup`` more untimed calls, then
    ``repeat`` timed loops of ``number`` calls; ``number`` first grows until one loop
    takes ``min_repeat_ms`` (the loops that find it are untimed calls too, which is
    why no extra warmup is the default), so tiny kernels are not timer noise.
    ``flush_cache`` writes over ``flush_bytes`` before each repeat so every repeat
    starts with cold caches. ``cold_weights``: when the workload marks constant
    parameters (a model's weights), each timed loop is a single call, with those
    parameters evicted from the CPU's caches before it, as if a model run had last
    read them an inference ago (``compiler.runtime.cache_eviction``; TVM's
    ``enable_cpu_cache_flush``). On by default: for ResNet-18 tuned on Zen 5 the
    kernels' cold times added up to their time inside the model within 1 %, their warm
    times to 11 % less (``benchmarks/cold_weights.py --database``). A workload without
    constant parameters (a lone operator) is timed in loops either way.
    ``timeout_s`` bounds loading, checking and timing one candidate (a slow one gets
    fewer repeats rather than pass it; see ``workers.measure``); ``reference_timeout_s``
    bounds computing a workload's reference outputs (once per workload per runner
    process). ``tolerance`` is the
    largest accepted error relative to the largest reference value (None: by dtype).
    """

    number: int = 1
    repeat: int = 5
    min_repeat_ms: float = 20.0
    warmup: int = 0
    flush_cache: bool = False
    flush_bytes: int = 64 << 20
    cold_weights: bool = True
    timeout_s: float = 10.0
    reference_timeout_s: float = 120.0
    seed: int = 0
    tolerance: float | None = None

    def __post_init__(self) -> None:
        for name in ("number", "repeat"):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"MeasureConfig.{name} must be at least 1, got {getattr(self, name)}"
                )
        for name in ("min_repeat_ms", "warmup", "flush_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"MeasureConfig.{name} must not be negative")
        for name in ("timeout_s", "reference_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(
                    f"MeasureConfig.{name} must be positive, got {getattr(self, name)}"
                )

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> MeasureConfig:
        return MeasureConfig(**data)


class Builder(abc.ABC):
    """Builds candidates, in parallel where the backend can."""

    @abc.abstractmethod
    def stream(self, candidates: Sequence[Candidate]) -> Iterator[tuple[int, BuildResult]]:
        """Yield ``(index, result)`` for every candidate, in the order they finish."""

    def build(self, candidates: Sequence[Candidate]) -> list[BuildResult]:
        """One result per candidate, in the candidates' order."""
        return _in_order(self.stream(candidates), len(candidates))

    @abc.abstractmethod
    def close(self) -> None:
        """Release processes or actors; the builder is not used after this."""

    def __enter__(self) -> Builder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Runner(abc.ABC):
    """Checks and times built candidates, one at a time per host."""

    @abc.abstractmethod
    def stream(self, builds: Sequence[BuildResult]) -> Iterator[tuple[int, RunResult]]:
        """Yield ``(index, result)`` for every build, in the order they finish; a failed
        build passes through as a run result with the same error."""

    def run(self, builds: Sequence[BuildResult]) -> list[RunResult]:
        """One result per build, in the builds' order."""
        return _in_order(self.stream(builds), len(builds))

    def check_target(self, target: str) -> None:
        """Raise WorkersError when this runner can never measure ``target`` (a GPU
        target on a host without that GPU), before a search fills the database with
        records of the host's failure rather than the candidates'. By default any
        target can be measured: where no host of its kind is alive yet, one may join."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Release processes or actors; the runner is not used after this."""

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Workers:
    """A builder and a runner of one backend, used together; ``shutdown`` (if any)
    releases what the backend itself holds, such as a Ray it started."""

    builder: Builder
    runner: Runner
    shutdown: Callable[[], None] | None = None
    # Successful builds, so that a candidate measured again soon is not built again.
    kept_builds: BuildCache = field(
        init=False, default_factory=BuildCache, repr=False, compare=False
    )
    # The batch building in the background while the tuner searches (``build_ahead``).
    builds_ahead: BuildsAhead = field(
        init=False, default_factory=BuildsAhead, repr=False, compare=False
    )
    # What the builder and the runner have done (``workers.tally``).
    tally: WorkTally = field(init=False, default_factory=WorkTally, repr=False, compare=False)

    def build_ahead(self, candidates: Sequence[Candidate]) -> None:
        """Start building the candidates in the background and return at once, so that
        the caller can search meanwhile; the next ``build`` or ``measure`` waits for
        them and takes their builds."""
        self.builds_ahead.start(self._build, candidates)

    def build(self, candidates: Sequence[Candidate]) -> list[BuildResult]:
        """Build the candidates, or take their builds made ahead (``build_ahead``) or
        kept (``BuildCache``): a search confirms its fastest trials by measuring them a
        second time, soon after, and a model's tuning re-times its finalists."""
        self.builds_ahead.wait()
        return self._build(candidates, take_ahead=True)

    def _build(
        self, candidates: Sequence[Candidate], *, take_ahead: bool = False
    ) -> list[BuildResult]:
        """The candidates' builds: made ahead (when ``take_ahead``; not in the thread
        that builds ahead), kept, or made now."""
        builds: dict[int, BuildResult] = {}
        for k, candidate in enumerate(candidates):
            made = self.builds_ahead.take(candidate) if take_ahead else None
            if made is None:
                made = self.kept_builds.get(candidate)
            if made is not None:
                builds[k] = made
        fresh = [k for k in range(len(candidates)) if k not in builds]
        built = self.builder.build([candidates[k] for k in fresh])
        self.tally.add_builds(built)
        for k, build in zip(fresh, built, strict=True):
            self.kept_builds.put(build)
            builds[k] = build
        return [builds[k] for k in range(len(candidates))]

    def measure(self, candidates: Sequence[Candidate]) -> list[RunResult]:
        """Build the whole batch (``build``), then run it, so that no build competes
        with a timing."""
        return self.run(self.build(candidates))

    def run(self, builds: Sequence[BuildResult]) -> list[RunResult]:
        """Check and time ``builds`` (from ``build``; one may come more than once), in
        order, on the runner."""
        started = time.perf_counter()
        runs = self.runner.run(builds)
        self.tally.add_runs(len(runs), time.perf_counter() - started)
        return runs

    def close(self) -> None:
        try:
            self.builds_ahead.wait()
        finally:
            self._close()

    def _close(self) -> None:
        try:
            self.builder.close()
            self.runner.close()
        finally:
            if self.shutdown is not None:
                self.shutdown()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _in_order(stream: Iterator[tuple[int, Any]], count: int) -> list[Any]:
    results: list[Any] = [None] * count
    for index, result in stream:
        if results[index] is not None:
            raise WorkersError(f"a backend reported candidate {index} twice")
        results[index] = result
    missing = [k for k, r in enumerate(results) if r is None]
    if missing:
        raise WorkersError(
            f"a backend dropped candidates {missing}; every candidate needs a result"
        )
    return results
