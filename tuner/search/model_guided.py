"""What every cost-model-guided strategy shares: a model fitted on what was measured
(and on other workloads' records), and an exploring share of each batch.

The model learns log throughput relative to each workload's fastest, so records
of workloads of different sizes teach which decisions are good, not how fast the
machine is; a failure or illegal decisions are taught as worse than the slowest
success. Until ``warmup`` candidates ran and no transfer records were given, the
model has nothing to learn from and the strategy proposes nothing (the base
class measures at random). Each batch keeps a share ``epsilon`` of random points,
so the search keeps exploring regions the model wrongly thinks poor.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from compiler.schedule import Trace
from tuner import cost_model
from tuner.cost_model.base import CostModel
from tuner.cost_model.features import FeatureExtractor, ProgramFeatures
from tuner.cost_model.features import create as create_features
from tuner.search.base import Observation, SearchError, SearchStrategy
from tuner.space.base import Decisions, Space

# How much lower than the slowest success (in log throughput) a failure is taught.
FAILURE_PENALTY = 1.0
# A point the model expected within CONTENDER times the fastest's time, measured more
# than SURPRISE times slower than it expected, is measured again.
CONTENDER = 1.5
SURPRISE = 2.0
# The default model's options over program features: their 190 columns describe the
# same traffic several ways (bytes and cache lines, footprints per loop level, a store's
# and the sum over stores), and trees that each see half of the columns and 80 % of the
# rows ordered the pairs of a task they never saw 0.754 of the time instead of 0.715,
# and held-out records of seen tasks 0.868 instead of 0.856 (ten 70/30 splits; the
# recordings of tests/fixtures). Over the 14 columns of decision features the same
# options lost (0.81 -> 0.76).
PROGRAM_MODEL_OPTIONS = {"subsample": 0.8, "colsample_bytree": 0.5}


class ModelGuidedSearch(SearchStrategy):
    """``features`` is an extractor or its kind; ``model`` a CostModel (default:
    ``default_model``, XGBoost regression seeded by ``seed``); ``epsilon`` the share of
    each batch drawn at random; ``warmup`` the measurements before the model is used
    (default: one batch)."""

    learns_from_other_workloads = True
    steered_by_measurements = True

    def __init__(
        self,
        space: Space,
        *,
        features: str | FeatureExtractor,
        model: CostModel | None = None,
        epsilon: float = 0.1,
        warmup: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(space, **options)
        if not 0.0 <= epsilon <= 1.0:
            raise SearchError(f"epsilon must be in [0, 1], got {epsilon!r}")
        self.extractor = create_features(features) if isinstance(features, str) else features
        self.model = model if model is not None else default_model(self.extractor, self.seed)
        self.epsilon = epsilon
        self.warmup = self.batch_size if warmup is None else warmup
        self.np_rng = np.random.default_rng(self.seed)
        self._transfer: list[tuple[np.ndarray, np.ndarray]] = []
        # The model's score of each point it proposed for its rank, and how much of
        # ``history`` has been checked against those scores.
        self._expected: dict[Decisions, float] = {}
        self._checked = 0

    @cached_property
    def _feature_width(self) -> int:
        """The number of features the extractor makes of one point of this space."""
        return self.extractor.width(self.space)

    def warm_start(self, features: np.ndarray, throughputs: np.ndarray) -> None:
        """Add records of one other workload to train on from the first ask: feature
        rows made by an extractor of the same kind, and their throughputs (flop/s; 0
        for a failure)."""
        rows = np.asarray(features, dtype=float)
        values = np.asarray(throughputs, dtype=float).reshape(-1)
        if not len(values):
            return
        if rows.ndim != 2 or len(rows) != len(values):
            raise SearchError(
                f"warm_start needs a 2-D feature matrix and one throughput per row; got shapes "
                f"{rows.shape} and {values.shape}"
            )
        if rows.shape[1] != self._feature_width:
            raise SearchError(
                f"transfer records have {rows.shape[1]} features, this space's points "
                f"{self._feature_width}; make both with the same extractor kind and space"
            )
        self._transfer.append((rows, values))

    def learn_from(self, space: Space, records: Iterable[tuple[Trace | str, float | None]]) -> int:
        """Train on another workload's records (``space`` is that workload's space) from
        the first ask; records its space does not recognise, or a space whose features
        do not line up with this one's, are left out."""
        return self._learn_points(space, *recorded_points(space, records))

    def _learn_points(self, space: Space, points: list[Decisions], throughputs: np.ndarray) -> int:
        """``learn_from`` the points of ``space`` its records measured; returns how many
        it took."""
        if not points:
            return 0
        rows = self.extractor.transform(space, points)
        if rows.shape[1] != self._feature_width:
            return 0
        self.warm_start(rows, throughputs)
        return len(points)

    def _worth_confirming(self) -> list[Observation]:
        """The fastest points measured once, then the surprises since the last call:
        points measured once that the model expected to be contenders and that measured
        more than SURPRISE times slower than expected (at most ``confirm_top``, the most
        surprising first). The first call also looks at the restored points."""
        fastest = super()._worth_confirming()
        new = self.history[self._checked :]
        self._checked = len(self.history)
        if self.best is None or self.best.seconds is None:
            return fastest
        best = self.best.seconds
        surprises: list[tuple[float, Observation]] = []
        for observation in new:
            expected = self._expected.get(observation.decisions)
            if (
                expected is None
                or observation.seconds is None
                or observation.candidate is None
                or observation.candidate.trace_hash in self._confirmed
                or observation in fastest
                or expected < -math.log(CONTENDER)
            ):
                continue
            shortfall = expected - math.log(best / observation.seconds)
            if shortfall > math.log(SURPRISE):
                surprises.append((shortfall, observation))
        surprises.sort(key=lambda pair: -pair[0])
        return fastest + [o for _, o in surprises[: self.confirm_top]]

    # for model-guided strategies ----------------------------------------------------

    def _expect(self, scores: dict[Decisions, float]) -> None:
        """Keep the model's scores of points it proposes, to check their measurements by."""
        self._expected.update(scores)

    def _model_ready(self) -> bool:
        """Whether there is something to fit: ``warmup`` measurements or transfer records."""
        return self._warmed_up() or bool(self._transfer)

    def _warmed_up(self) -> bool:
        """Whether ``warmup`` of this search's own candidates were measured."""
        observed = sum(o.seconds is not None for o in self.history)
        return observed >= max(1, self.warmup)

    def _observed(self) -> tuple[list[Decisions], np.ndarray]:
        """Every point this search observed and its throughput (0 for a failure)."""
        points = [o.decisions for o in self.history]
        return points, np.array([self.throughput(o.seconds) for o in self.history])

    def _fit(self) -> float:
        """Train the model on every observation and the transfer records; returns the
        spread (standard deviation) of its targets, a natural unit of score."""
        groups = list(self._transfer)
        if self.history:
            points, own = self._observed()
            groups.append((self.extractor.transform(self.space, points), own))
        rows = np.concatenate([features for features, _ in groups])
        targets = np.concatenate([log_targets(values) for _, values in groups])
        self.model.fit(rows, targets)
        return float(np.std(targets)) or 1.0

    def _predict(self, points: Sequence[Decisions]) -> np.ndarray:
        """The model's score of each point (larger is faster)."""
        if not points:
            return np.zeros(0)
        return self.model.predict(self.extractor.transform(self.space, points))

    def _with_exploration(self, ranked: Sequence[Decisions], count: int) -> Iterator[Decisions]:
        """``ranked`` (best first) with a share ``epsilon`` of the first ``count`` points
        replaced by random unvisited ones; the rest of ``ranked`` after them, for the
        caller to skip into when some turn out illegal or already measured."""
        explore = self._exploration_count(count)
        yield from ranked[: count - explore]
        yield from itertools.islice(self.random_unvisited(), explore)
        yield from ranked[count - explore :]

    def _exploration_count(self, count: int) -> int:
        """``epsilon * count`` rounded up or down at random, so small batches explore
        at the right rate on average."""
        share = self.epsilon * count
        whole = math.floor(share)
        return whole + (1 if self.rng.random() < share - whole else 0)


def default_model(extractor: FeatureExtractor, seed: int) -> CostModel:
    """XGBoost regression seeded by ``seed``, with ``PROGRAM_MODEL_OPTIONS`` when it
    reads program features."""
    options = PROGRAM_MODEL_OPTIONS if isinstance(extractor, ProgramFeatures) else {}
    return cost_model.create("xgb", random_state=seed, **options)


def log_targets(throughputs: np.ndarray) -> np.ndarray:
    """log throughput relative to the fastest (0 for it, negative for the others),
    with failures (0) taught as FAILURE_PENALTY below the slowest success, or all
    zero when nothing succeeded."""
    ok = throughputs > 0
    if not ok.any():
        return np.zeros(len(throughputs))
    logs = np.zeros(len(throughputs))
    logs[ok] = np.log(throughputs[ok])
    logs[ok] -= logs[ok].max()
    logs[~ok] = logs[ok].min() - FAILURE_PENALTY
    return logs


def transfer_records(
    extractor: FeatureExtractor, space: Space, records: Iterable[tuple[Trace | str, float | None]]
) -> tuple[np.ndarray, np.ndarray]:
    """Feature rows and throughputs of stored records of another workload, for
    ``warm_start``. ``space`` is that workload's space; with decision features it
    must share this one's design (the same template), loop-nest features compare
    across spaces. Records whose trace the space does not recognise are left out."""
    points, throughputs = recorded_points(space, records)
    if not points:
        return np.zeros((0, 0)), np.zeros(0)
    return extractor.transform(space, points), throughputs


def recorded_points(
    space: Space, records: Iterable[tuple[Trace | str, float | None]]
) -> tuple[list[Decisions], np.ndarray]:
    """The points of ``space`` that stored records (a trace and seconds or None) measured,
    and their throughputs (0 for a failure); traces the space did not make are left out."""
    points = []
    throughputs = []
    flops = space.flop_count or 1
    for trace, seconds in records:
        candidate = space.candidate_from_trace(trace)
        if candidate is not None:
            points.append(candidate.decisions)
            throughputs.append(flops / seconds if seconds else 0.0)
    return points, np.array(throughputs)
