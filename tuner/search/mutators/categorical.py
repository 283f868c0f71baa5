"""Categorical: any other candidate of a categorical decision that no dedicated
mutator owns (a loop order, a packing, a vectorize flag): such choices have no
order a smaller step could follow."""

from __future__ import annotations

from tuner.search.mutators.base import RedrawMutator
from tuner.space.base import Domain

# Roles whose decisions a dedicated mutator changes.
OWNED_ROLES = ("unroll", "parallel")


class CategoricalMutator(RedrawMutator):
    name = "categorical"

    def applies_to(self, domain: Domain) -> bool:
        return (
            domain.kind == "sample_categorical"
            and domain.role not in OWNED_ROLES
            and len(domain) > 1
        )
