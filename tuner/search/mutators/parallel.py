"""Parallel extent: a neighbouring candidate for a decision whose role is
``parallel`` (TVM MetaSchedule's MutateParallel). The candidates are ordered by
how much of the loop nest runs in parallel, so a step to either side is the
small change: one more or one fewer loop fused into the parallel one."""

from __future__ import annotations

import random
from typing import Any

from tuner.search.mutators.base import Mutator
from tuner.space.base import Domain


class ParallelMutator(Mutator):
    name = "parallel"

    def applies_to(self, domain: Domain) -> bool:
        return domain.kind == "sample_categorical" and domain.role == "parallel" and len(domain) > 1

    def mutate(self, domain: Domain, value: Any, rng: random.Random) -> Any | None:
        position = domain.position(value)
        if position is None:
            return None
        steps = [p for p in (position - 1, position + 1) if 0 <= p < len(domain)]
        return domain.values[rng.choice(steps)]
