"""Mutators drawn with probabilities: how a search changes one point into a
neighbour. Each step draws a mutator among those that apply to some decision of
the point's design (probabilities normalised over them, as MetaSchedule does),
then one such decision, and asks the mutator for another value."""

from __future__ import annotations

import random
from collections.abc import Mapping

from tuner.search.base import SearchError
from tuner.search.mutators.base import Mutator
from tuner.space.base import Decisions, Space

# Draws of a mutator and a decision before a point counts as one no mutator can move.
MUTATION_ATTEMPTS = 8


class MutatorMix:
    """``mutators`` with the probability of each (any positive weights; those of the
    mutators that apply to a design are normalised among themselves)."""

    def __init__(self, mutators: Mapping[Mutator, float]) -> None:
        for mutator, weight in mutators.items():
            if not weight >= 0.0:
                raise SearchError(
                    f"mutator {mutator.name!r} has probability {weight!r}; give a number >= 0"
                )
        self.mutators = {m: w for m, w in mutators.items() if w > 0.0}
        if not self.mutators:
            raise SearchError("every mutator has probability 0; give at least one a positive one")

    def mutated(self, space: Space, point: Decisions, rng: random.Random) -> Decisions | None:
        """``point`` with one decision changed by a mutator, None when the mutators
        found nothing to change in MUTATION_ATTEMPTS tries."""
        domains = space.decision_domains(point.design)
        sites = {
            mutator: [k for k, domain in enumerate(domains) if mutator.applies_to(domain)]
            for mutator in self.mutators
        }
        usable = [m for m, found in sites.items() if found]
        if not usable:
            return None
        weights = [self.mutators[m] for m in usable]
        for _ in range(MUTATION_ATTEMPTS):
            mutator = rng.choices(usable, weights=weights)[0]
            k = rng.choice(sites[mutator])
            value = mutator.mutate(domains[k], point.values[k], rng)
            if value is not None and value != point.values[k]:
                return Decisions(point.design, (*point.values[:k], value, *point.values[k + 1 :]))
        return None
