"""Compute location: another legal loop to compute a block at (TVM MetaSchedule's
MutateComputeLocation). The domain lists the locations legal on the design; one
that another decision makes illegal fails to replay, a ScheduleError."""

from __future__ import annotations

from tuner.search.mutators.base import RedrawMutator
from tuner.space.base import Domain


class ComputeLocationMutator(RedrawMutator):
    name = "compute_location"

    def applies_to(self, domain: Domain) -> bool:
        return domain.kind == "sample_compute_location" and len(domain) > 1
