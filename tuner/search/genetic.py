"""A genetic algorithm over knob choices (AutoTVM's GATuner, elitist).

Each batch is a generation of children of the fastest configs measured so far:
two parents drawn with probability proportional to their throughput, each knob
taken from either parent (uniform crossover), then each knob redrawn at random
with probability ``mutation_prob``. Until something has been measured, and when
the population breeds nothing new, the base class fills the batch at random.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tuner.search.base import SearchStrategy
from tuner.space.base import Config

# Children tried per config wanted before giving up on a converged population.
ATTEMPTS_PER_CHILD = 50


class GeneticSearch(SearchStrategy):
    """``population`` is how many of the fastest configs breed; ``mutation_prob``
    the chance that a child's knob is redrawn at random."""

    def __init__(
        self, space: Any, *, population: int = 16, mutation_prob: float = 0.1, **options: Any
    ) -> None:
        super().__init__(space, **options)
        self.population = population
        self.mutation_prob = mutation_prob

    def _propose(self, count: int) -> Iterator[Config]:
        parents = self._parents()
        if not parents:
            return
        configs = [p[0] for p in parents]
        weights = [p[1] for p in parents]
        dims = self.space.dims
        for _ in range(ATTEMPTS_PER_CHILD * count):
            mother, father = self.rng.choices(configs, weights=weights, k=2)
            child = [
                self.rng.choice(pair) for pair in zip(mother.choices, father.choices, strict=True)
            ]
            for k, dim in enumerate(dims):
                if self.rng.random() < self.mutation_prob:
                    child[k] = self.rng.randrange(dim)
            config = self.space.config_of(child)
            if not self.is_visited(config):
                yield config

    def _parents(self) -> list[tuple[Config, float]]:
        """The fastest measured configs and their throughputs."""
        measured = [o for o in self.history if o.seconds is not None]
        measured.sort(key=lambda o: (o.seconds, o.config.index))
        return [(o.config, self.throughput(o.seconds)) for o in measured[: self.population]]
