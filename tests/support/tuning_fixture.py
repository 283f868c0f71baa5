"""The recorded tuning runs of ``tests/fixtures/tuning_records.json.gz``.

Random search over the knob templates of matmul 256^3 and a small conv2d, each
trace re-timed with care by ``benchmarks/record_cost_model_fixture.py``: data for
cost-model tests, which never time anything themselves. Its metadata names the
machine, the load when recording began, and how well the timings agree.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuner import space as spaces
from tuner.space import Decisions, Space
from tuner.task import TuneTask

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "tuning_records.json.gz"


@dataclass(frozen=True)
class RecordedWorkload:
    """One workload's records: its template space, the points measured and their
    throughputs (flop/s; 0 for a failure), in the order they were measured."""

    name: str
    space: Space
    points: tuple[Decisions, ...]
    throughputs: np.ndarray


def recorded_workloads(path: Path = FIXTURE) -> list[RecordedWorkload]:
    """The workloads of the fixture (or of another recording at ``path``)."""
    with gzip.open(path, "rt") as opened:
        document = json.load(opened)
    loaded = []
    for entry in document["workloads"]:
        # The space of the CPU the records were made on, whatever this host is.
        task = TuneTask.from_spec(entry["spec"], entry["target"])
        space = spaces.space_for(task.func, target=task.target)
        points = []
        throughputs = []
        for trace, seconds in entry["records"]:
            candidate = space.candidate_from_trace(trace)
            assert candidate is not None, f"a recorded trace of {entry['spec']} does not read back"
            points.append(candidate.decisions)
            throughputs.append(task.flop_count / seconds if seconds else 0.0)
        name = entry["spec"]["op"]
        loaded.append(RecordedWorkload(name, space, tuple(points), np.array(throughputs)))
    return loaded
