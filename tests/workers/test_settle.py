"""A runner times a kernel past the calls in which its heap temporaries still fault
(``workers.measure.settle``)."""

from __future__ import annotations

import sys

import pytest
from fresh_process import WINOGRAD_SPEC, run_fresh

# In a fresh process, measure a Winograd convolution (whose transformed tiles live on
# the heap) the way a runner does, and count the page faults inside its timed loops.
MEASURE_COUNTING_FAULTS = """
    import json, resource, sys
    import workers.measure as measure
    from compiler.schedule import Schedule
    from compiler.workload.spec import workload_from_spec
    from workers.base import Candidate, MeasureConfig
    from workers.compile_candidate import build_candidate

    if sys.argv[1] == "unsettled":
        measure.settle = lambda kernel, args: None
    measure.SETTLE_SECONDS = 60  # however slow the machine is today
    faults = []
    time_raw = measure.time_raw

    def counted(*args, **kwargs):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        result = time_raw(*args, **kwargs)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        return result

    measure.time_raw = counted
    func = workload_from_spec(json.loads(sys.argv[2]))
    candidate = Candidate.make(func, Schedule(func).trace)
    measurer = measure.Measurer(host="here")
    config = MeasureConfig()
    assert measurer.prepare(candidate, config) is None
    result = measurer.measure(build_candidate(candidate), config)
    assert result.ok, result.error
    print(sum(faults))
"""


# Whether an unsettled kernel's first calls fault at all depends on where the heap
# stands in its process: about half of fresh processes here fault hundreds of times,
# the others not once. One that faults shows what settling prevents; the chance that
# this many in a row all miss is about 1 in 1,000.
UNSETTLED_TRIES = 10


def _timed_faults(mode: str) -> int:
    return int(run_fresh(MEASURE_COUNTING_FAULTS, mode, WINOGRAD_SPEC))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_no_timed_call_of_a_kernel_with_heap_temporaries_takes_a_page_fault() -> None:
    assert _timed_faults("settled") <= 10  # a stray one or two
    assert any(_timed_faults("unsettled") > 100 for _ in range(UNSETTLED_TRIES)), (
        "no unsettled process faulted any more: drop the test"
    )
