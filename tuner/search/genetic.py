"""A genetic algorithm over decisions (AutoTVM's GATuner, elitist).

Each batch is a generation of children of the fastest candidates measured so far:
two parents of one design drawn with probability proportional to their
throughput, each decision taken from either parent (uniform crossover), then each
decision redrawn from its domain with probability ``mutation_prob``. Until
something has been measured, and when the population breeds nothing new, the
base class fills the batch at random.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tuner.search.base import SearchStrategy
from tuner.space.base import Decisions

# Children tried per point wanted before giving up on a converged population.
ATTEMPTS_PER_CHILD = 50


class GeneticSearch(SearchStrategy):
    """``population`` is how many of the fastest candidates breed; ``mutation_prob``
    the chance that a child's decision is redrawn at random."""

    steered_by_measurements = True

    def __init__(
        self, space: Any, *, population: int = 16, mutation_prob: float = 0.1, **options: Any
    ) -> None:
        super().__init__(space, **options)
        self.population = population
        self.mutation_prob = mutation_prob

    def _propose(self, count: int) -> Iterator[Decisions]:
        parents = [o.decisions for o in self.measured()[: self.population]]
        if not parents:
            return
        weights = [self.throughput(o.seconds) for o in self.measured()[: self.population]]
        for _ in range(ATTEMPTS_PER_CHILD * count):
            mother, father = self.rng.choices(parents, weights=weights, k=2)
            if mother.design != father.design:
                continue
            child = self._mutated(self._crossed(mother, father))
            if not self.is_visited(child):
                yield child

    def _crossed(self, mother: Decisions, father: Decisions) -> Decisions:
        pairs = zip(mother.values, father.values, strict=True)
        return Decisions(mother.design, tuple(self.rng.choice(pair) for pair in pairs))

    def _mutated(self, child: Decisions) -> Decisions:
        domains = self.space.decision_domains(child.design)
        values = [
            self.rng.choice(domain.values) if self.rng.random() < self.mutation_prob else value
            for domain, value in zip(domains, child.values, strict=True)
        ]
        return Decisions(child.design, tuple(values))
