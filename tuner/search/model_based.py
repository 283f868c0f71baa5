"""The model-based search (AutoTVM's XGBTuner): a cost model trained on what was
measured picks what to measure next.

Each ask, in order:

1. until ``warmup`` candidates ran (and no transfer records were given), measure
   at random: the model has nothing to learn from;
2. fit the cost model on every observation (log throughput; a failure or illegal
   decisions count as worse than the slowest success), plus the transfer records
   of other workloads given to ``warm_start`` or ``learn_from``. Each workload's
   targets are relative to its own fastest, so workloads of different sizes teach
   the model which decisions are good, not how fast the machine is;
3. run simulated annealing over the decisions of each design, from the fastest
   points so far and from random ones, scored by the model; keep the best
   unvisited points;
4. fill the batch with them, except a share ``epsilon`` drawn at random, so the
   search keeps exploring regions the model wrongly thinks poor.

Features default to the decisions, which the annealing can score by the
thousand. ``features="loop_nest"`` (or ``"combined"``) reads the lowered loop
nest, about 20 ms a point: give it a small annealing budget (``sa_chains=16,
sa_steps=4``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator
from functools import cached_property
from typing import Any

import numpy as np

from compiler.schedule import Trace
from tuner import cost_model
from tuner.cost_model.base import CostModel
from tuner.cost_model.features import FeatureExtractor
from tuner.cost_model.features import create as create_features
from tuner.search.annealing import anneal
from tuner.search.base import SearchError, SearchStrategy
from tuner.space.base import Decisions, Space, positions

# How much lower than the slowest success (in log throughput) a failure is taught.
FAILURE_PENALTY = 1.0


class ModelBasedSearch(SearchStrategy):
    """``features`` is an extractor or its kind; ``model`` a CostModel (default: XGBoost
    regression seeded by ``seed``); ``epsilon`` the share of each batch drawn at
    random; ``warmup`` the measurements before the model is used (default: one
    batch); ``sa_chains``, ``sa_steps`` and ``temperature`` size the annealing."""

    learns_from_other_workloads = True

    def __init__(
        self,
        space: Space,
        *,
        features: str | FeatureExtractor = "decision",
        model: CostModel | None = None,
        epsilon: float = 0.1,
        warmup: int | None = None,
        sa_chains: int = 128,
        sa_steps: int = 100,
        temperature: float = 1.0,
        **options: Any,
    ) -> None:
        super().__init__(space, **options)
        if not 0.0 <= epsilon <= 1.0:
            raise SearchError(f"epsilon must be in [0, 1], got {epsilon!r}")
        self.extractor = create_features(features) if isinstance(features, str) else features
        self.model = (
            model if model is not None else cost_model.create("xgb", random_state=self.seed)
        )
        self.epsilon = epsilon
        self.warmup = self.batch_size if warmup is None else warmup
        self.sa_chains = sa_chains
        self.sa_steps = sa_steps
        self.temperature = temperature
        self.np_rng = np.random.default_rng(self.seed)
        self._transfer: list[tuple[np.ndarray, np.ndarray]] = []

    @cached_property
    def _feature_width(self) -> int:
        """The number of features the extractor makes of one point of this space."""
        point = self.space.random_decisions(random.Random(0))
        return self.extractor.transform(self.space, [point]).shape[1]

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
        rows, values = transfer_records(self.extractor, space, records)
        if not len(values) or rows.shape[1] != self._feature_width:
            return 0
        self.warm_start(rows, values)
        return len(values)

    def _propose(self, count: int) -> Iterator[Decisions]:
        observed = [o for o in self.history if o.seconds is not None]
        if len(observed) < max(1, self.warmup) and not self._transfer:
            return
        spread = self._fit()
        ranked = self._search(2 * count, spread)
        explore = self._exploration_count(count)
        yield from ranked[: count - explore]
        for _, decisions in zip(range(explore), self.random_unvisited(), strict=False):
            yield decisions
        yield from ranked[count - explore :]

    def _fit(self) -> float:
        """Train the model; returns the spread (standard deviation) of its targets,
        the unit of the annealing temperature."""
        groups = list(self._transfer)
        if self.history:
            points = [o.decisions for o in self.history]
            own = np.array([self.throughput(o.seconds) for o in self.history])
            groups.append((self.extractor.transform(self.space, points), own))
        rows = np.concatenate([features for features, _ in groups])
        targets = np.concatenate([_log_targets(values) for _, values in groups])
        self.model.fit(rows, targets)
        return float(np.std(targets)) or 1.0

    def _search(self, keep: int, spread: float) -> list[Decisions]:
        """The ``keep`` unvisited points the annealing scores best, best first, over
        every design (the chains shared among them)."""
        designs = self.space.design_count
        found: list[tuple[float, Decisions]] = []
        for design in range(designs):
            domains = self.space.decision_domains(design)

            def score(positions: np.ndarray, design: int = design) -> np.ndarray:
                rows = self.extractor.transform_positions(self.space, design, positions)
                return self.model.predict(rows)

            visited = {positions(domains, p.values) for p in self._visited if p.design == design}
            best = anneal(
                tuple(len(d) for d in domains),
                score,
                self._starts(design, max(1, self.sa_chains // designs)),
                steps=self.sa_steps,
                keep=keep,
                visited=visited,
                rng=self.np_rng,
                temperature=self.temperature * spread,
            )
            for value, walked in best:
                values = tuple(d.values[p] for d, p in zip(domains, walked, strict=True))
                found.append((value, Decisions(design, values)))
        found.sort(key=lambda entry: -entry[0])
        return [decisions for _, decisions in found[:keep]]

    def _starts(self, design: int, chains: int) -> np.ndarray:
        """Chain starts in design ``design``: its fastest points measured, the rest
        random points."""
        domains = self.space.decision_domains(design)
        dims = np.array([len(d) for d in domains])
        elites = [
            positions(domains, o.decisions.values)
            for o in self.measured()
            if o.decisions.design == design
        ][: chains // 2]
        randoms = self.np_rng.integers(dims, size=(chains - len(elites), len(domains)))
        rows = np.array(elites, dtype=np.int64).reshape(len(elites), len(domains))
        return np.concatenate([rows, randoms.astype(np.int64)])

    def _exploration_count(self, count: int) -> int:
        """``epsilon * count`` rounded up or down at random, so small batches explore
        at the right rate on average."""
        share = self.epsilon * count
        whole = math.floor(share)
        return whole + (1 if self.rng.random() < share - whole else 0)


def _log_targets(throughputs: np.ndarray) -> np.ndarray:
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
    points = []
    throughputs = []
    flops = space.flop_count or 1
    for trace, seconds in records:
        candidate = space.candidate_from_trace(trace)
        if candidate is not None:
            points.append(candidate.decisions)
            throughputs.append(flops / seconds if seconds else 0.0)
    if not points:
        return np.zeros((0, 0)), np.zeros(0)
    return extractor.transform(space, points), np.array(throughputs)
