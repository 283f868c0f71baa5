"""Template-free tuning against the template tuner and the peers, in one run: GEMM
1024^3, dense 512^3 with bias and ReLU, a batch-1 dense 1024 -> 4096 with bias and
ReLU (a GEMV), conv2d NCHW 1x64x56x56 (64 3x3 filters, pad 1), conv2d NHWC
1x56x56x64 (64 3x3 filters, pad 1, stride 2), softmax 1024x1000 and layer_norm
512x768. The dense layers' and convolutions' weights are constants, as in a model:
the tuners may store them in their own layout, converted once, and onnxruntime gets
them as initializers, which it may prepack too.

    python benchmarks/search.py --trials 64 --seeds 3          # per seed: a fresh database
    python benchmarks/search.py --trials 256 --only gemm --json  # last line: one JSON object
    python benchmarks/search.py --trials 64 --seeds 3 --reference-trials 1000

Per workload it prints numpy's GFLOP/s (its strongest formulation), onnxruntime's
(where installed), the default schedule's, then per seed the template tuner (the
model-based search over the knob template, where one fits) and the template-free
tuner (the evolutionary search over the space generated from schedule rules): the
best schedule built and timed here afresh, its GFLOP/s as the tuning's re-timing (in
the runner process) measured it, trials per second, and the share of the wall time
the search itself took (making the space, proposing, learning). Then the spread
of the fresh GFLOP/s over the seeds ((max - min) / median), and the same of every
seed's best of both tuners timed side by side at the end, in turns, which is what
the spread and the template-free tuner's ratio to the template tuner are given by.
A host's speed moves by a third between the minutes two runs take (onnxruntime's
NHWC convolution: 144 GFLOP/s in one run, 201 in the next), so only kernels timed in
turns compare. Each run uses a temporary SQLite database and the local workers;
nothing else should run on the machine meanwhile.

``--reference-trials N`` runs one more template-free seed (the next seed number) for
N trials, then times every template-free seed's best and that reference's best side
by side, in turns, and gives each seed's share of the reference's speed.

The tuners time candidates as the peers are timed here, in loops that find the
weights in the caches (``WARM``). Tuning a model times each kernel with its constant
weights evicted first, as a model run leaves them (``MeasureConfig.cold_weights``),
but a kernel compared alone is called in a loop. Timed cold, the GEMV's 16 MB weight
streams from memory and every schedule of it runs at about the same speed, so a
search timing cold cannot rank the schedules that a warm loop tells apart.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures

import numpy as np  # noqa: E402

from compiler.runtime.prepacked import pack_arguments  # noqa: E402
from compiler.runtime.profiling import time_raw  # noqa: E402
from tuner.space import templates_for  # noqa: E402
from tuner.space_choice import choose_space  # noqa: E402
from tuner.task import TuneTask  # noqa: E402
from workers import MeasureConfig  # noqa: E402

sys.path.append(_HERE)  # the packages are imported: now the sibling modules can be
from baselines import (  # noqa: E402
    REPEATS,
    baselines,
    print_baselines,
    reference_of,
    rounded,
    seconds_per_call,
)
from onnx_peer import onnxruntime_version  # noqa: E402
from tuned_workloads import CONV, GEMM, tune_from_scratch  # noqa: E402

WORKLOADS: dict[str, dict[str, Any]] = {
    "gemm": GEMM,
    "dense_bias_relu": {
        "op": "dense",
        "args": {"batch": 512, "in_features": 512, "out_features": 512, "activation": "relu"},
        "constants": ["W", "bias"],
    },
    "dense_gemv": {
        "op": "dense",
        "args": {"batch": 1, "in_features": 1024, "out_features": 4096, "activation": "relu"},
        "constants": ["W", "bias"],
    },
    "conv2d_nchw": {**CONV, "constants": ["kernel"]},
    "conv2d_nhwc": {
        "op": "conv2d_nhwc",
        "args": {**CONV["args"], "stride": 2},
        "constants": ["kernel"],
    },
    "softmax": {"op": "softmax", "args": {"shape": [1024, 1000]}},
    "layer_norm": {"op": "layer_norm", "args": {"shape": [512, 768]}},
}
# Rounds of the side-by-side timing of the seeds' bests and the reference's, each best
# timed once a round in turn (the fastest of REPEATS loops of at least 20 ms); each
# keeps its fastest round.
SIDE_BY_SIDE_ROUNDS = 5
# How the tuners time candidates: as the peers are timed, with warm caches.
WARM = MeasureConfig(cold_weights=False)
# (space, search) of each tuner the benchmark compares.
TUNERS = {"template": ("template", "xgb"), "template_free": ("generated", "evolutionary")}


def seed_row(
    task: TuneTask, arrays: list[np.ndarray], tuner: str, trials: int, seed: int
) -> tuple[dict[str, Any], Callable[[], Any]]:
    """The seed's figures, and a call of its best kernel on ``arrays`` (its weights
    converted once), to time again beside others."""
    space_name, search = TUNERS[tuner]
    start = time.monotonic()
    space = choose_space(space_name, task.func, target=task.target, seed=seed)
    space_seconds = time.monotonic() - start
    result, kernel = tune_from_scratch(
        task, trials=trials, seed=seed, space=space, tuner=search, measure=WARM
    )
    if not result.best:
        raise RuntimeError(f"{tuner} seed {seed}: no schedule succeeded in {trials} trials")
    expected = reference_of(task)(*arrays[:-1])
    entry = kernel[kernel.entry_name]
    packed = pack_arguments(kernel, entry.name, arrays)  # constant weights, converted once
    entry(*packed)
    np.testing.assert_allclose(arrays[-1], expected, rtol=1e-3, atol=1e-3)
    fresh_seconds = seconds_per_call(lambda: entry(*packed))
    wall = space_seconds + result.wall_seconds
    figures = {
        "seed": seed,
        "fresh_gflops": task.gflops(fresh_seconds),
        "fresh_ms": fresh_seconds * 1e3,
        "retimed_gflops": result.best[0].gflops,
        "trials": result.measured,
        "errors": result.errors,
        "confirmed": result.confirmed,
        "trials_per_second": result.measured / wall,
        "search_overhead": (space_seconds + result.search_seconds) / wall,
        "build_seconds_per_trial": result.work.build_seconds / max(result.measured, 1),
        "run_share": result.work.run_seconds / wall,
    }
    return figures, lambda: entry(*packed)


def side_by_side(calls: list[Callable[[], Any]]) -> list[float]:
    """Seconds per call of each of ``calls``, timed in turns (SIDE_BY_SIDE_ROUNDS
    rounds, each call's fastest round), so that they share the host's speed."""
    rounds = [
        [time_raw(call, (), 1, REPEATS, 20.0).min for call in calls]
        for _ in range(SIDE_BY_SIDE_ROUNDS)
    ]
    return [min(column) for column in zip(*rounds, strict=True)]


def reference_row(
    task: TuneTask,
    arrays: list[np.ndarray],
    seeds: list[tuple[dict[str, Any], Callable[[], Any]]],
    trials: int,
) -> dict[str, Any]:
    """A template-free seed of ``trials`` trials (the seed after ``seeds``), and each
    of ``seeds``' best as a share of its speed, timed side by side with it."""
    figures, call = seed_row(task, arrays, "template_free", trials, len(seeds))
    *seconds, reference = side_by_side([c for _, c in seeds] + [call])
    shares = [reference / s for s in seconds]
    return {
        "seed": figures["seed"],
        "trials": figures["trials"],
        "gflops": task.gflops(reference),
        "seeds_gflops": [task.gflops(s) for s in seconds],
        "seeds_share": shares,
        "worst_share": min(shares),
    }


def tuner_summary(seeds: list[dict[str, Any]]) -> dict[str, Any]:
    fresh = [s["fresh_gflops"] for s in seeds]
    median = statistics.median(fresh)
    return {
        "seeds": seeds,
        "gflops_median": median,
        "spread_over_seeds": (max(fresh) - min(fresh)) / median,
        "trials_per_second": statistics.median(s["trials_per_second"] for s in seeds),
        "search_overhead": statistics.median(s["search_overhead"] for s in seeds),
    }


def bench(name: str, spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    task = TuneTask.from_spec(spec)
    rng = np.random.default_rng(0)
    shapes = [tuple(int(d) for d in p.shape) for p in task.func.params]
    arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    row = baselines(task, spec, arrays)
    tuners = ["template_free"] if not templates_for(task.func) else ["template", "template_free"]
    calls: dict[str, list[Callable[[], Any]]] = {}
    for tuner in tuners:
        seeds = [seed_row(task, arrays, tuner, args.trials, s) for s in range(args.seeds)]
        row[tuner] = tuner_summary([figures for figures, _ in seeds])
        calls[tuner] = [call for _, call in seeds]
        if tuner == "template_free" and args.reference_trials:
            row["reference"] = reference_row(task, arrays, seeds, args.reference_trials)
    beside = iter(side_by_side([call for tuner in tuners for call in calls[tuner]]))
    for tuner in tuners:
        gflops = [task.gflops(next(beside)) for _ in calls[tuner]]
        median = statistics.median(gflops)
        row[tuner]["beside_gflops"] = gflops
        row[tuner]["beside_median"] = median
        row[tuner]["spread_beside"] = (max(gflops) - min(gflops)) / median
    free = row["template_free"]["gflops_median"]
    row["free_vs_default"] = free / row["default_gflops"]
    row["free_vs_numpy"] = free / row["numpy_gflops"]
    if "onnxruntime_gflops" in row:
        row["free_vs_onnxruntime"] = free / row["onnxruntime_gflops"]
    if "template" in row:
        row["free_vs_template"] = (
            row["template_free"]["beside_median"] / row["template"]["beside_median"]
        )
    print_row(name, row)
    return rounded(row)


def print_row(name: str, row: dict[str, Any]) -> None:
    print_baselines(name, row)
    print(
        "  tuner          seed  fresh GFLOP/s  re-timed  trials/s  search share"
        "  build s/trial  run share"
    )
    for tuner in TUNERS:
        if tuner not in row:
            continue
        for s in row[tuner]["seeds"]:
            retimed = s["retimed_gflops"]
            print(
                f"  {tuner:<13} {s['seed']:>5}  {s['fresh_gflops']:13.1f}"
                f"  {'-' if retimed is None else f'{retimed:8.1f}':>8}"
                f"  {s['trials_per_second']:8.2f}  {s['search_overhead']:12.1%}"
                f"  {s['build_seconds_per_trial']:13.2f}  {s['run_share']:9.1%}"
            )
        beside = ", ".join(f"{g:.1f}" for g in row[tuner]["beside_gflops"])
        print(
            f"  {tuner:<13} spread over seeds {row[tuner]['spread_over_seeds']:.1%}; their "
            f"bests timed in turns at the end: {beside} GFLOP/s, spread "
            f"{row[tuner]['spread_beside']:.1%}"
        )
    ratios = [f"{row['free_vs_default']:.2f}x default", f"{row['free_vs_numpy']:.2f}x numpy"]
    if "free_vs_onnxruntime" in row:
        ratios.append(f"{row['free_vs_onnxruntime']:.2f}x onnxruntime")
    if "free_vs_template" in row:
        ratios.append(f"{row['free_vs_template']:.2f}x the template tuner")
    print(f"  template-free (median of seeds): {', '.join(ratios)}")
    if "reference" in row:
        ref = row["reference"]
        shares = ", ".join(f"{share:.1%}" for share in ref["seeds_share"])
        print(
            f"  template-free seed {ref['seed']}, {ref['trials']} trials: {ref['gflops']:.1f} "
            f"GFLOP/s; timed beside it, the seeds above reach {shares} of it"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64, help="trials per run")
    parser.add_argument("--seeds", type=int, default=3, help="runs per tuner, seeds 0..N-1")
    parser.add_argument("--only", choices=sorted(WORKLOADS), action="append", help="a workload")
    parser.add_argument(
        "--reference-trials",
        type=int,
        default=0,
        metavar="N",
        help="also tune one template-free seed for N trials, and time every seed's best "
        "beside its best (0: none)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args()
    if args.trials < 1 or args.seeds < 1:
        parser.error("--trials and --seeds must be at least 1")
    if args.reference_trials < 0:
        parser.error("--reference-trials must be 0 (none) or more")
    print(f"onnxruntime: {onnxruntime_version() or 'not installed (pip install .[bench])'}")
    report = {}
    for name, spec in WORKLOADS.items():
        if args.only is None or name in args.only:
            report[name] = bench(name, spec, args)
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()
