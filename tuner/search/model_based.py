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

from collections.abc import Iterator
from typing import Any

import numpy as np

from tuner.cost_model.base import CostModel
from tuner.cost_model.features import FeatureExtractor
from tuner.search.annealing import anneal
from tuner.search.model_guided import ModelGuidedSearch
from tuner.space.base import Decisions, Space, positions


class ModelBasedSearch(ModelGuidedSearch):
    """``features`` is an extractor or its kind; ``model`` a CostModel (default:
    ``default_model``, XGBoost regression seeded by ``seed``); ``epsilon`` the share of
    each batch drawn at random; ``warmup`` the measurements before the model is used
    (default: one batch); ``sa_chains``, ``sa_steps`` and ``temperature`` size the annealing."""

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
        super().__init__(
            space, features=features, model=model, epsilon=epsilon, warmup=warmup, **options
        )
        self.sa_chains = sa_chains
        self.sa_steps = sa_steps
        self.temperature = temperature

    def _propose(self, count: int) -> Iterator[Decisions]:
        if not self._model_ready():
            return
        spread = self._fit()
        ranked = self._search(2 * count, spread)
        yield from self._with_exploration(ranked, count)

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
