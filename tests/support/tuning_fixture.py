"""The recorded tuning runs of ``tests/fixtures/``.

Random search over knob templates, each trace re-timed with care by
``benchmarks/record_cost_model_fixture.py``: data for cost-model tests, which never
time anything themselves. ``tuning_records.json.gz`` holds matmul 256^3 and a small
conv2d; ``cross_task_records.json.gz`` four convolutions of other shapes. Each
file's metadata names the machine, the load when recording began, and how well the
timings agree.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuner import space as spaces
from tuner.space import Decisions, Space
from tuner.task import TuneTask

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FIXTURE = FIXTURES / "tuning_records.json.gz"
CROSS_TASK_FIXTURE = FIXTURES / "cross_task_records.json.gz"


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


def pair_accuracy(predicted: np.ndarray, measured: np.ndarray) -> tuple[int, int]:
    """Pairs of different measured values ordered the same way by the prediction, and
    all such pairs."""
    upper = np.triu_indices(len(measured), k=1)
    truth = np.sign(measured[:, None] - measured[None, :])[upper]
    guess = np.sign(predicted[:, None] - predicted[None, :])[upper]
    compared = truth != 0
    return int((truth == guess)[compared].sum()), int(compared.sum())


def pooled_pair_accuracy(groups: Iterable[tuple[str, np.ndarray, np.ndarray]]) -> float:
    """``pair_accuracy`` over all pairs of ``groups`` of (label, predicted, measured),
    pairs taken within a group; each group's share is printed."""
    agreed = compared = 0
    for label, predicted, measured in groups:
        right, pairs = pair_accuracy(predicted, measured)
        print(f"\n{label}: pairwise ranking accuracy {right / pairs:.3f} over {pairs} pairs")
        agreed += right
        compared += pairs
    return agreed / compared
