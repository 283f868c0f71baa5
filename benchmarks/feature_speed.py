"""Milliseconds per point of each feature kind, on the template spaces of GEMM 256^3
and conv2d NCHW 1x16x28x28 (32 3x3 filters, pad 1), or on their generated spaces.

    python benchmarks/feature_speed.py --points 60
    python benchmarks/feature_speed.py --space generated

Per workload it prints the time to make a point's candidate (the replay a search
pays for every point it proposes, whatever it scores them with), the same for a
child mutated from one of those points (what an evolutionary search proposes; the
space has made its parents, so the replay resumes from a kept prefix), and then,
per feature kind, the time of a row on top of a point's, with fresh caches. Times are the
CPU time of this process, which other work on a shared machine disturbs less than
the wall clock. ``--profile KIND`` prints cProfile's top functions instead.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures

from compiler.schedule import ScheduleError  # noqa: E402
from compiler.tuned.replay import REPLAYS  # noqa: E402
from tuner.cost_model import features  # noqa: E402
from tuner.space import Decisions, Space  # noqa: E402
from tuner.space_choice import choose_space  # noqa: E402
from tuner.task import TuneTask  # noqa: E402

sys.path.append(_HERE)  # the packages are imported: now the sibling modules can be
from record_cost_model_fixture import SETS  # noqa: E402

KINDS = ("loop_nest", "program")
WORKLOADS = SETS["default"][0]  # the default fixture's workloads


def legal_points(space: Space, count: int, seed: int) -> list[Decisions]:
    rng = random.Random(seed)
    return [space.sample(rng).decisions for _ in range(count)]


def milliseconds_per_point(
    task: TuneTask, space_kind: str, points: list[Decisions], kind: str | None
) -> float:
    """Candidates made afresh (a new space, an empty replay cache), then rows of
    ``kind`` (None: the candidates alone)."""
    REPLAYS.clear()
    space = choose_space(space_kind, task.func, target=task.target)
    extractor = features.create(kind) if kind is not None else None
    start = time.process_time()
    for point in points:
        space.candidate(point)
    made = time.process_time()
    if extractor is not None:
        extractor.transform(space, points)
    end = time.process_time()
    return 1e3 * ((end - made) if extractor is not None else (made - start)) / len(points)


def milliseconds_per_child(task: TuneTask, space_kind: str, parents: list[Decisions]) -> float:
    """Candidates of one mutation of each of ``parents``, made after the parents by the
    same space (an empty replay cache before the parents)."""
    REPLAYS.clear()
    space = choose_space(space_kind, task.func, target=task.target)
    rng = random.Random(1)
    for point in parents:
        space.candidate(point)
    children = [space.mutated(point, rng) for point in parents]
    start = time.process_time()
    for child in children:
        try:
            space.candidate(child)
        except ScheduleError:
            pass  # an illegal child costs its replay up to the refusing step, as in a search
    return 1e3 * (time.process_time() - start) / len(children)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=60)
    parser.add_argument("--profile", choices=KINDS)
    parser.add_argument("--space", choices=("template", "generated"), default="template")
    args = parser.parse_args()
    for spec in WORKLOADS:
        name = spec["op"]
        task = TuneTask.from_spec(spec)
        space = choose_space(args.space, task.func, target=task.target)
        points = legal_points(space, args.points, seed=0)
        if args.profile:
            profile = cProfile.Profile()
            profile.runcall(milliseconds_per_point, task, args.space, points, args.profile)
            print(f"# {name}, {args.profile}")
            pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
            continue
        candidate_ms = milliseconds_per_point(task, args.space, points, None)
        child_ms = milliseconds_per_child(task, args.space, points)
        rows = {kind: milliseconds_per_point(task, args.space, points, kind) for kind in KINDS}
        parts = ", ".join(f"{kind} {ms:.2f} ms" for kind, ms in rows.items())
        print(
            f"{name}: candidate {candidate_ms:.2f} ms/point, {child_ms:.2f} ms/mutated child; "
            f"features on top: {parts}"
        )


if __name__ == "__main__":
    main()
