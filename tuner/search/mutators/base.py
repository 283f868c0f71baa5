"""The mutator extension point: one kind of small change to one decision (TVM
MetaSchedule's Mutator).

A mutator says which domains it works on (``applies_to``) and changes one
decision of such a domain into another value of that domain (``mutate``), or
says there is none (None). It never schedules anything: the search replays the
mutated point, and an illegal one is a ScheduleError the search catches.
"""

from __future__ import annotations

import abc
import random
from typing import Any, ClassVar

from tuner.space.base import Domain


class Mutator(abc.ABC):
    """Changes one decision; ``name`` is its kind in ``mutators.KINDS``."""

    name: ClassVar[str]

    @abc.abstractmethod
    def applies_to(self, domain: Domain) -> bool:
        """Whether this mutator changes decisions of ``domain``."""

    @abc.abstractmethod
    def mutate(self, domain: Domain, value: Any, rng: random.Random) -> Any | None:
        """Another value of ``domain`` near ``value`` in this mutator's sense, None when
        it has none to offer."""


class RedrawMutator(Mutator):
    """A mutator that moves a decision to any other value of its domain, uniformly:
    where the values have no order a small step could follow."""

    def mutate(self, domain: Domain, value: Any, rng: random.Random) -> Any | None:
        others = [v for v in domain.values if v != value]
        return rng.choice(others) if others else None
