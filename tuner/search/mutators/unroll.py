"""Unroll: another maximum unroll step for a decision whose role is ``unroll`` (TVM
MetaSchedule's MutateUnroll); any other candidate, since the best step depends on
the loop body more than on the current one."""

from __future__ import annotations

from tuner.search.mutators.base import RedrawMutator
from tuner.space.base import Domain


class UnrollMutator(RedrawMutator):
    name = "unroll"

    def applies_to(self, domain: Domain) -> bool:
        return domain.kind == "sample_categorical" and domain.role == "unroll" and len(domain) > 1
