"""The search extension point: a strategy proposes configs and is told their costs.

The protocol is ask/tell (TVM MetaSchedule's search strategy): the loop that owns
the workers asks ``generate_measure_candidates()`` for a batch, measures it, and
hands the results to ``notify_runner_results``; ``None`` from the ask means the
search is over (budget spent, space exhausted, or no improvement for
``early_stopping`` trials). A strategy never measures anything itself.

The bookkeeping every strategy shares lives here: no config is proposed twice
in a run, configs measured before (``restore``) are never proposed, a config the
schedule primitives refuse (ScheduleError) is remembered as invalid and skipped,
and the best result so far is tracked. A strategy only says which configs it
would like next, best first (``_propose``).
"""

from __future__ import annotations

import abc
import itertools
import math
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from compiler.schedule import ScheduleError, Trace
from tuner.space.base import Config, Space


class SearchError(ValueError):
    """A strategy asked for something it cannot do (an unknown kind, results that
    do not match the candidates)."""


class Measurement(Protocol):
    """What a strategy needs of a measurement: seconds per call, None when it failed.
    ``workers.RunResult`` is one; so is ``MeasureResult``."""

    @property
    def mean_seconds(self) -> float | None: ...


@dataclass(frozen=True)
class MeasureResult:
    """A measurement as plain data: seconds per call, or None and why not."""

    mean_seconds: float | None
    error: str | None = None


@dataclass(frozen=True)
class MeasureCandidate:
    """A config to measure and its trace, which is what the workers build."""

    config: Config
    trace: Trace


@dataclass(frozen=True)
class Observation:
    """What the strategy knows of one config: its seconds (None when the measurement
    failed or the config is illegal) and whether it was illegal (never measured).
    ``best`` is only ever an observation with seconds."""

    config: Config
    seconds: float | None
    invalid: bool = False


class SearchStrategy(abc.ABC):
    """Proposes batches of configs of ``space`` until ``max_trials`` are measured.

    ``batch_size`` is the most configs one ask returns; ``early_stopping`` ends the
    search after that many measured trials without a faster one (None: never);
    ``seed`` makes every choice reproducible.
    """

    learns_from_other_workloads: ClassVar[bool] = False

    def __init__(
        self,
        space: Space,
        *,
        max_trials: int,
        batch_size: int = 16,
        early_stopping: int | None = None,
        seed: int = 0,
    ) -> None:
        for name, value in (("max_trials", max_trials), ("batch_size", batch_size)):
            if not isinstance(value, int) or value < 1:
                raise SearchError(f"{name} must be a positive int, got {value!r}")
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
        self.rng = random.Random(seed)
        self.history: list[Observation] = []
        self.trials = 0
        self.best: Observation | None = None
        self._since_best = 0
        self._visited: set[int] = set()
        self._pending: dict[int, Config] = {}

    # the protocol ------------------------------------------------------------------

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        """The next batch to measure, or None when the search is over."""
        wanted = min(self.batch_size, self.max_trials - self.trials - len(self._pending))
        if self._stopped() or wanted <= 0:
            return None
        batch: list[MeasureCandidate] = []
        for config in itertools.chain(self._propose(wanted), self.random_unvisited()):
            if config.index in self._visited:
                continue
            self._visited.add(config.index)
            try:
                trace = self.space.trace(config)
            except ScheduleError:
                self._record(Observation(config, None, invalid=True))
                continue
            self._pending[config.index] = config
            batch.append(MeasureCandidate(config, trace))
            if len(batch) == wanted:
                break
        return batch or None

    def notify_runner_results(
        self, candidates: Sequence[MeasureCandidate], results: Sequence[Measurement]
    ) -> None:
        """Tell the strategy how the candidates of an earlier batch ran."""
        if len(candidates) != len(results):
            raise SearchError(
                f"got {len(results)} results for {len(candidates)} candidates; give one each"
            )
        indices = [c.config.index for c in candidates]
        for index in indices:
            if index not in self._pending or indices.count(index) > 1:
                raise SearchError(
                    f"config {index} was not proposed by this search or was already reported"
                )
        for candidate, result in zip(candidates, results, strict=True):
            del self._pending[candidate.config.index]
            self.trials += 1
            self._record(Observation(candidate.config, _seconds(result.mean_seconds)))

    def restore(self, history: Iterable[tuple[Config, float | None]]) -> None:
        """Configs measured before (a resumed run): never proposed again, and known to
        the strategy as if it had measured them. They do not count as trials."""
        for config, seconds in history:
            if config.index in self._visited:
                continue
            self._visited.add(config.index)
            self._record(Observation(config, _seconds(seconds)))
        self._since_best = 0

    def restore_traces(self, records: Iterable[tuple[Trace | str, float | None]]) -> int:
        """``restore`` from stored records (a trace or its JSON, and seconds or None),
        as a database returns them; traces this space did not make are left out.
        Returns how many were restored."""
        history = []
        for trace, seconds in records:
            config = trace_config(self.space, trace)
            if config is not None:
                history.append((config, seconds))
        self.restore(history)
        return len(history)

    def learn_from(self, space: Space, records: Iterable[tuple[Trace | str, float | None]]) -> int:
        """Records of another workload (``space`` is its space; a trace and seconds or
        None, as the database returns them) to learn from before measuring. A strategy
        with a cost model trains on them (transfer, and ``learns_from_other_workloads``
        is True, so callers skip finding them for the others). Returns how many it took."""
        return 0

    # for strategies ----------------------------------------------------------------

    @abc.abstractmethod
    def _propose(self, count: int) -> Iterator[Config]:
        """Configs in the order the strategy would measure them; the caller skips
        visited ones and, when the iterator ends first, fills the batch at random."""

    def is_visited(self, config: Config) -> bool:
        return config.index in self._visited

    @property
    def visited_count(self) -> int:
        return len(self._visited)

    def random_unvisited(self) -> Iterator[Config]:
        """Uniformly random configs not yet visited, without repeats, until none is left."""
        size = self.space.size
        if size - len(self._visited) <= 0:
            return
        if size <= 4 * (len(self._visited) + 1024):
            remaining = [i for i in range(size) if i not in self._visited]
            self.rng.shuffle(remaining)
            yield from (self.space.config(i) for i in remaining)
            return
        while len(self._visited) < size:
            index = self.rng.randrange(size)
            if index not in self._visited:
                yield self.space.config(index)

    def throughput(self, seconds: float | None) -> float:
        """Floating-point operations per second (per second when the space has no
        flop count); 0 for a failure."""
        if seconds is None:
            return 0.0
        flops = getattr(self.space, "flop_count", 1) or 1
        return flops / seconds

    # internals -----------------------------------------------------------------------

    def _record(self, observation: Observation) -> None:
        self.history.append(observation)
        if not observation.invalid:
            improved = observation.seconds is not None and (
                self.best is None or observation.seconds < self.best.seconds  # type: ignore[operator]
            )
            if improved:
                self.best = observation
            self._since_best = 0 if improved else self._since_best + 1

    def _stopped(self) -> bool:
        if self.trials >= self.max_trials or len(self._visited) >= self.space.size:
            return True
        return self.early_stopping is not None and self._since_best >= self.early_stopping


def trace_config(space: Space, trace: Trace | str) -> Config | None:
    """The config of ``space`` a trace (or its JSON) records, None for a malformed or
    foreign one."""
    try:
        parsed = Trace.from_json(trace) if isinstance(trace, str) else trace
    except ScheduleError:
        return None
    return space.config_from_trace(parsed)


def _seconds(value: float | None) -> float | None:
    if value is None:
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) and seconds > 0 else None
