"""The search extension point: a strategy proposes candidates and is told their costs.

The protocol is ask/tell (TVM MetaSchedule's search strategy): the loop that owns
the workers asks ``generate_measure_candidates()`` for a batch of candidates
(workload + trace with its decisions), measures it, and hands the results to
``notify_runner_results``; ``None`` from the ask means the search is over
(budget spent, space exhausted, or no improvement for ``early_stopping``
trials). A strategy never measures anything itself.

The bookkeeping every strategy shares lives here: no point of the space is
proposed twice in a run and no trace twice (candidates are deduplicated by their
trace hash), candidates measured before (``restore``) are never proposed, decisions
the schedule primitives refuse (ScheduleError) are remembered as invalid and
skipped, and the best result so far is tracked. A strategy only says which
decisions it would like next, best first (``_propose``).

Confirmation: the fastest measured points steer what comes next (a model learns from
them, an evolutionary search breeds from them), so one measurement slowed by
another process must not decide their place. After each batch the loop asks
``confirmation_candidates()``: the ``confirm_top`` fastest points measured only once
(and whatever a strategy adds: a model-guided one, the points it expected fast that
measured slow). It measures them again and tells ``notify_confirmations``; a point
keeps its fastest time, since interference only ever slows a run. A confirmation is
no trial: it measures nothing new.
"""

from __future__ import annotations

import abc
import itertools
import math
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from time import monotonic
from typing import ClassVar, Protocol

from compiler.errors import ErrorKind
from compiler.schedule import ScheduleError, Trace
from tuner.space.base import Decisions, EnumerableSpace, Space, TraceCandidate

# Random draws in a row that hit visited points before a space without an index
# counts as exhausted.
RANDOM_MISSES = 256
# Draws of one design's random point until one replays (``random_unvisited``).
LEGAL_DRAWS = 8
# Designs' turns in a row in which no draw replayed before a space counts as holding
# no legal point (every point refused: a template that cannot schedule the workload),
# so that the search stops instead of drawing forever.
ILLEGAL_TURNS = 64
# The fastest measured points that are measured a second time (``confirm_top``).
CONFIRM_TOP = 2


class SearchError(ValueError):
    """A strategy asked for something it cannot do (an unknown kind, results that
    do not match the candidates, a space without a capability it needs)."""


class Timing(Protocol):
    """What a strategy needs of a measurement: seconds per call, None when it failed.
    ``workers.RunResult`` is one; so is ``MeasureResult``."""

    @property
    def seconds(self) -> float | None: ...


@dataclass(frozen=True)
class MeasureResult:
    """A measurement as plain data: seconds per call, or None with the kind of failure
    and its message."""

    seconds: float | None
    error: str | None = None
    error_kind: ErrorKind | None = None


@dataclass(frozen=True)
class Observation:
    """What the strategy knows of one point: its candidate (None when the decisions
    are illegal, never measured: ``invalid``) and its seconds (None when the
    measurement failed or the point is illegal). ``best`` is only ever an
    observation with seconds."""

    decisions: Decisions
    candidate: TraceCandidate | None
    seconds: float | None

    @property
    def invalid(self) -> bool:
        return self.candidate is None


class SearchStrategy(abc.ABC):
    """Proposes batches of candidates of ``space`` until ``max_trials`` are measured.

    ``batch_size`` is the most candidates one ask returns; ``early_stopping`` ends the
    search after that many measured trials without a faster one (None: never);
    ``seed`` makes every choice reproducible; ``confirm_top`` is how many of the
    fastest points are measured twice (0: none; default CONFIRM_TOP for a strategy
    ``steered_by_measurements``, else 0).
    """

    learns_from_other_workloads: ClassVar[bool] = False
    # Whether measured times choose what is proposed next (so the fastest are confirmed
    # by default); random and grid search propose the same whatever they measure.
    steered_by_measurements: ClassVar[bool] = False

    def __init__(
        self,
        space: Space,
        *,
        max_trials: int,
        batch_size: int = 16,
        early_stopping: int | None = None,
        seed: int = 0,
        confirm_top: int | None = None,
    ) -> None:
        for name, value in (("max_trials", max_trials), ("batch_size", batch_size)):
            if not isinstance(value, int) or value < 1:
                raise SearchError(f"{name} must be a positive int, got {value!r}")
        if confirm_top is None:
            confirm_top = CONFIRM_TOP if self.steered_by_measurements else 0
        if not isinstance(confirm_top, int) or isinstance(confirm_top, bool) or confirm_top < 0:
            raise SearchError(f"confirm_top must be None or an int >= 0, got {confirm_top!r}")
        if early_stopping is not None and (
            not isinstance(early_stopping, int) or early_stopping < 1
        ):
            raise SearchError(
                f"early_stopping must be None or a positive int, got {early_stopping!r}"
            )
        self.space = space
        self.max_trials = max_trials
        self.batch_size = batch_size
        self.early_stopping = early_stopping
        self.seed = seed
        self.confirm_top = confirm_top
        self.rng = random.Random(seed)
        self.history: list[Observation] = []
        self.trials = 0
        self.best: Observation | None = None
        self.exhausted = False
        self._since_best = 0
        self._visited: set[Decisions] = set()
        self._hashes: set[str] = set()
        self._pending: dict[str, TraceCandidate] = {}
        # Where each measured trace's observation sits in ``history``, and the traces
        # measured twice (confirmed, or restored from two records).
        self._places: dict[str, int] = {}
        self._confirmed: set[str] = set()
        # The wall time from handing out the last batch to its results: its builds and
        # runs, the time an ask has beside a measurement (None before the first).
        self.measuring_seconds: float | None = None
        self._handed_out_at: float | None = None

    # the protocol ------------------------------------------------------------------

    def generate_measure_candidates(self) -> list[TraceCandidate] | None:
        """The next batch to measure, or None when the search is over."""
        wanted = min(self.batch_size, self.max_trials - self.trials - len(self._pending))
        if self._stopped() or wanted <= 0:
            return None
        batch: list[TraceCandidate] = []
        for decisions in itertools.chain(self._propose(wanted), self.random_unvisited()):
            if decisions in self._visited:
                continue
            self._visited.add(decisions)
            try:
                candidate = self.space.candidate(decisions)
            except ScheduleError:
                self._record(Observation(decisions, None, None))
                continue
            if candidate.trace_hash in self._hashes:
                continue
            self._hashes.add(candidate.trace_hash)
            self._pending[candidate.trace_hash] = candidate
            batch.append(candidate)
            if len(batch) == wanted:
                break
        if batch:
            self._handed_out_at = monotonic()
        return batch or None

    def notify_runner_results(
        self, candidates: Sequence[TraceCandidate], results: Sequence[Timing]
    ) -> None:
        """Tell the strategy how the candidates of an earlier batch ran."""
        _check_one_each(candidates, results)
        hashes = [c.trace_hash for c in candidates]
        for digest in hashes:
            if digest not in self._pending or hashes.count(digest) > 1:
                raise SearchError(
                    f"candidate {digest[:12]} was not proposed by this search or was already "
                    "reported"
                )
        if self._handed_out_at is not None:
            self.measuring_seconds = monotonic() - self._handed_out_at
            self._handed_out_at = None
        for candidate, result in zip(candidates, results, strict=True):
            del self._pending[candidate.trace_hash]
            self.trials += 1
            seconds = _seconds(result.seconds)
            self._record(Observation(candidate.decisions, candidate, seconds))

    def confirmation_candidates(self) -> list[TraceCandidate]:
        """Measured candidates to measure once more before the next ask (see the module
        docstring); each is asked for once."""
        return [o.candidate for o in self._worth_confirming() if o.candidate is not None]

    def notify_confirmations(
        self, candidates: Sequence[TraceCandidate], results: Sequence[Timing]
    ) -> None:
        """Tell the strategy how its confirmation candidates ran the second time."""
        _check_one_each(candidates, results)
        for candidate in candidates:
            if candidate.trace_hash not in self._places or candidate.trace_hash in self._confirmed:
                raise SearchError(
                    f"candidate {candidate.trace_hash[:12]} was not measured by this search or "
                    "was already confirmed"
                )
        for candidate, result in zip(candidates, results, strict=True):
            self._confirm(candidate, _seconds(result.seconds))

    def restore(self, history: Iterable[tuple[TraceCandidate, float | None]]) -> int:
        """Candidates measured before (a resumed run): never proposed again, and known
        to the strategy as if it had measured them. They do not count as trials. A
        trace given twice (a search measurement and its confirmation) is confirmed and
        keeps its fastest time. Returns how many were new to it."""
        restored = 0
        for candidate, seconds in history:
            if candidate.trace_hash in self._places:
                self._confirm(candidate, _seconds(seconds))
                continue
            if candidate.trace_hash in self._hashes:
                continue
            self._hashes.add(candidate.trace_hash)
            self._visited.add(candidate.decisions)
            self._record(Observation(candidate.decisions, candidate, _seconds(seconds)))
            restored += 1
        self._since_best = 0
        return restored

    def restore_traces(self, records: Iterable[tuple[Trace | str, float | None]]) -> int:
        """``restore`` from stored records (a trace or its JSON, and seconds or None),
        as a database returns them; traces this space did not make are left out.
        Returns how many were restored."""
        history = []
        for trace, seconds in records:
            candidate = self.space.candidate_from_trace(trace)
            if candidate is not None:
                history.append((candidate, seconds))
        return self.restore(history)

    def learn_from(self, space: Space, records: Iterable[tuple[Trace | str, float | None]]) -> int:
        """Records of another workload (``space`` is its space; a trace and seconds or
        None, as the database returns them) to learn from before measuring. A strategy
        with a cost model trains on them (transfer, and ``learns_from_other_workloads``
        is True, so callers skip finding them for the others). Returns how many it took."""
        return 0

    # for strategies ----------------------------------------------------------------

    @abc.abstractmethod
    def _propose(self, count: int) -> Iterator[Decisions]:
        """Points in the order the strategy would measure them; the caller skips
        visited ones and, when the iterator ends first, fills the batch at random."""

    def is_visited(self, decisions: Decisions) -> bool:
        return decisions in self._visited

    def random_unvisited(self) -> Iterator[Decisions]:
        """Random points not yet visited, without repeats, until none is left (an
        enumerable space), RANDOM_MISSES draws in a row were all visited, or in
        ILLEGAL_TURNS turns in a row no draw replayed; the designs
        take turns (``design_rotation``), each drawn until a point replays (at most
        LEGAL_DRAWS times), so that a design whose points are often illegal still gets
        its turn."""
        space = self.space
        if isinstance(space, EnumerableSpace) and space.size <= 4 * (len(self._visited) + 1024):
            remaining = [d for d in space.enumerate() if d not in self._visited]
            self.rng.shuffle(remaining)
            yield from remaining
            self.exhausted = True
            return
        designs = design_rotation(range(space.design_count), self.rng)
        misses = illegal = 0
        while misses < RANDOM_MISSES and illegal < ILLEGAL_TURNS:
            design = next(designs)
            for _ in range(LEGAL_DRAWS):
                decisions = space.random_decisions(self.rng, design)
                legal = decisions not in self._visited and replays(space, decisions)
                if legal:
                    break
            illegal = 0 if legal else illegal + 1
            if decisions in self._visited:
                misses += 1
                continue
            misses = 0
            yield decisions
        self.exhausted = True

    def measured(self) -> list[Observation]:
        """The observations with seconds, fastest first (ties in the order they came)."""
        timed = [o for o in self.history if o.seconds is not None]
        return sorted(timed, key=lambda o: o.seconds or 0.0)

    def throughput(self, seconds: float | None) -> float:
        """Floating-point operations per second (per second when the workload has no
        flop count); 0 for a failure."""
        if seconds is None:
            return 0.0
        return (self.space.flop_count or 1) / seconds

    def _worth_confirming(self) -> list[Observation]:
        """The observations to measure again: the ``confirm_top`` fastest, measured once."""
        return [
            o
            for o in self.measured()[: self.confirm_top]
            if o.candidate is not None and o.candidate.trace_hash not in self._confirmed
        ]

    # internals -----------------------------------------------------------------------

    def _confirm(self, candidate: TraceCandidate, seconds: float | None) -> None:
        """A second measurement of a measured trace: it keeps the faster time."""
        self._confirmed.add(candidate.trace_hash)
        place = self._places[candidate.trace_hash]
        known = self.history[place]
        if seconds is None or (known.seconds is not None and known.seconds <= seconds):
            return
        self.history[place] = replace(known, seconds=seconds)
        if self.best is None or self.best.seconds is None or seconds < self.best.seconds:
            self.best = self.history[place]

    def _record(self, observation: Observation) -> None:
        if observation.candidate is not None:
            self._places[observation.candidate.trace_hash] = len(self.history)
        self.history.append(observation)
        if not observation.invalid:
            best_seconds = None if self.best is None else self.best.seconds
            improved = observation.seconds is not None and (
                best_seconds is None or observation.seconds < best_seconds
            )
            if improved:
                self.best = observation
            self._since_best = 0 if improved else self._since_best + 1

    def _stopped(self) -> bool:
        if self.trials >= self.max_trials or self.exhausted:
            return True
        return self.early_stopping is not None and self._since_best >= self.early_stopping


def _check_one_each(candidates: Sequence[TraceCandidate], results: Sequence[Timing]) -> None:
    if len(candidates) != len(results):
        raise SearchError(
            f"got {len(results)} results for {len(candidates)} candidates; give one each"
        )


def _seconds(value: float | None) -> float | None:
    if value is None:
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def design_rotation(designs: Iterable[int], rng: random.Random) -> Iterator[int]:
    """``designs`` in turns, each turn all of them once in a random order: random points
    drawn design by design, so that every design of a space gets its share of a batch.
    Drawn uniformly, one of a GEMM's six designs had no point in a 16-point first batch,
    and the search never measured it again."""
    order = list(designs)
    while order:
        rng.shuffle(order)
        yield from order


def replays(space: Space, decisions: Decisions) -> bool:
    """Whether ``decisions`` replay on ``space`` (which keeps the candidate or the
    error, so the caller that takes the point does not replay it again)."""
    try:
        space.candidate(decisions)
    except ScheduleError:
        return False
    return True
