"""Whole models against onnxruntime: ResNet-18, a BERT-base encoder layer and
MobileNetV2, with the default schedules and tuned under one trial budget, in one run.

    python benchmarks/model.py                          # every model, 2000 trials each
    python benchmarks/model.py --trials 0               # default schedules only
    python benchmarks/model.py --models bert --trials 32 --json   # last line: one JSON object
    python benchmarks/model.py --small --trials 8       # shrunken models, seconds
    python benchmarks/model.py --models resnet18 --trials 400 --database r18.db  # keep records

Per model (built by ``model_zoo.py`` with fixed random weights) it prints
onnxruntime's latency (all cores, the median of ORT_RUNS runs after a warm-up), ours
with the default schedules (the median of OUR_RUNS runs after a warm-up), the largest
difference of our output from onnxruntime's, the kernels a run calls and the time a
run spends outside them, per kernel (copying inputs and outputs, the calls); then,
with a budget, it tunes the model's tasks (``tuner.model_tune``) with the local
workers into a temporary SQLite database, printing each round on stderr, and times
and checks the model built from that database the same way. The task table gives each task's kind,
weight, MFLOP (all its occurrences), the trials it got, its best time, and its GFLOP/s
against the machine's FMA peak, measured at the start (``fma_peak.py``; the nominal
one, from the base clock, is printed beside it), and the time a call of
its kernel takes inside the model (tuned, or default without a budget): where that
exceeds the best time, the task's measurements flatter it. A 3x3 convolution is a
task per algorithm (direct, ``[winograd2]``, ``[winograd4]``); the model runs the
fastest. Speeds are onnxruntime's latency over ours, the median over PAIRS pairs of
timings, onnxruntime timed just before each of ours: above 1 where ours is faster.
Nothing else should run on the machine meanwhile; the exit status is 1 when an output
differs from onnxruntime's by more than the tolerance (after printing everything).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures

import numpy as np  # noqa: E402
import onnx  # noqa: E402

import db  # noqa: E402
import workers  # noqa: E402
from compiler.graph import Graph, GraphModule, import_onnx  # noqa: E402
from tuner.model_tasks import ModelTask, extract_tasks, tuned_tasks  # noqa: E402
from tuner.model_tune import ModelTuneOptions, ModelTuneResult, tune_model  # noqa: E402

sys.path.append(_HERE)  # the packages are imported: now the sibling modules can be
from fma_peak import measured_fma_peak_gflops, nominal_fma_peak_gflops  # noqa: E402
from model_zoo import FULL, MODELS, SMALL, Size  # noqa: E402
from onnx_peer import onnxruntime_version  # noqa: E402
from record_cost_model_fixture import machine  # noqa: E402

ORT_RUNS = 20
OUR_RUNS = 10
WARMUP_RUNS = 2
# Pairs of timings (onnxruntime's, then ours) per measurement: onnxruntime's own median
# moved by up to 25 % from one timing to the next on a cloud host, so the speed is the
# median of the pairs' ratios.
PAIRS = 3
# onnxruntime's pool threads spin for a while after a run; on a small machine they
# would take the cores from our parallel loops timed next.
SETTLE_S = 0.5
RTOL = 1e-3
ATOL = 1e-3


# Kinds of fused group shown per measurement, the costliest first.
TIME_ROWS = 6


def median_seconds(call: Callable[[], Any], runs: int) -> float:
    for _ in range(WARMUP_RUNS):
        call()
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def onnxruntime_run(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> Callable[[], Any]:
    """The model in an onnxruntime session the way a user runs it: every core, the
    default graph optimizations; the call returns the first output."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return lambda: session.run(None, inputs)[0]


def ours(
    module: GraphModule,
    inputs: dict[str, np.ndarray],
    expected: np.ndarray,
    peer: Callable[[], Any],
) -> dict[str, Any]:
    """Our latency beside onnxruntime's (``peer``), and how far our output is from
    onnxruntime's."""
    output = next(iter(module.run(**inputs).values()))
    error = float(np.max(np.abs(output - expected)))
    matches = bool(np.allclose(output, expected, rtol=RTOL, atol=ATOL))
    pairs = []
    for _ in range(PAIRS):
        peer_seconds = median_seconds(peer, ORT_RUNS)
        time.sleep(SETTLE_S)
        pairs.append((peer_seconds, median_seconds(lambda: module.run(**inputs), OUR_RUNS)))
    seconds = statistics.median(our for _, our in pairs)
    profile = module.profile(OUR_RUNS, **inputs)
    in_kernels = sum(step_seconds for _, step_seconds in profile)
    return {
        "ms": seconds * 1e3,
        "onnxruntime_ms": statistics.median(theirs for theirs, _ in pairs) * 1e3,
        "vs_onnxruntime": statistics.median(theirs / our for theirs, our in pairs),
        "pairs_ms": [[theirs * 1e3, our * 1e3] for theirs, our in pairs],
        "max_abs_error": error,
        "matches_onnxruntime": matches,
        "steps": len(profile),
        "launch_us_per_step": max(seconds - in_kernels, 0.0) / max(len(profile), 1) * 1e6,
        "time_by_kind": time_by_kind(profile),
        "ms_by_workload": ms_by_workload(profile),
    }


def ms_by_workload(profile: list[tuple[Any, float]]) -> dict[str, float]:
    """Each workload's milliseconds per call inside the model (the mean over the steps
    that call it), to set beside the time its task's records claim."""
    calls: dict[str, list[float]] = {}
    for step, seconds in profile:
        calls.setdefault(step.key, []).append(seconds * 1e3)
    return {key: statistics.fmean(ms) for key, ms in calls.items()}


def time_by_kind(profile: list[tuple[Any, float]]) -> list[dict[str, Any]]:
    """Where a run's time goes: each kind of fused group (``conv2d_add_relu``), how many
    steps of it the model runs, their milliseconds and share, the costliest first."""
    totals: dict[str, list[float]] = {}
    for step, seconds in profile:
        entry = totals.setdefault(step.kind, [0, 0.0])
        entry[0] += 1
        entry[1] += seconds
    whole = sum(seconds for _, seconds in totals.values()) or 1.0
    rows = [
        {"kind": kind, "steps": int(steps), "ms": seconds * 1e3, "share": seconds / whole}
        for kind, (steps, seconds) in totals.items()
    ]
    return sorted(rows, key=lambda row: -row["ms"])


def tuned(
    name: str,
    graph: Graph,
    tasks: list[ModelTask],
    trials: int,
    check: Callable[[GraphModule], dict[str, Any]],
    conv_block: int | None,
    database_path: str | None,
) -> tuple[ModelTuneResult, dict[str, Any]]:
    """The tasks tuned with ``trials`` into the SQLite file ``database_path`` (a
    temporary one where None), and ``check`` of the model built from it."""
    options = ModelTuneOptions(trials=trials)
    size = options.round_size(len(tuned_tasks(tasks)))
    print(f"  tuning: {trials} trials, {size} a round", flush=True)

    def progress(result: ModelTuneResult) -> None:
        print(
            f"{name} round {result.rounds}: {result.trials}/{trials} trials, "
            f"estimated {result.estimate_text()}",
            file=sys.stderr,
            flush=True,
        )

    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{database_path or os.path.join(folder, 'tune.db')}"
        with db.create(url) as database, workers.create("local") as backend:
            result = tune_model(
                tasks,
                database=database,
                workers=backend,
                options=options,
                on_round=progress,
                on_retime=lambda count: print(
                    f"{name}: re-timing {count} finalists side by side", file=sys.stderr
                ),
            )
            module = GraphModule(graph, database=database, conv_block=conv_block)
    return result, check(module)


def task_rows(
    tasks: list[ModelTask],
    result: ModelTuneResult | None,
    in_model: dict[str, float],
    peak: float | None,
) -> list[dict[str, Any]]:
    """Each task's weight, MFLOP, trials and best time, with its GFLOP/s against the
    FMA ``peak`` (GFLOP/s; a Winograd task counts the direct convolution's FLOPs, so it can pass
    the peak: it does fewer multiplications), and its kernel's time per call inside
    the model (``in_model``, by workload key; none for an algorithm the model does not
    run)."""
    states = {} if result is None else {p.task.task.workload_key: p.state for p in result.tasks}
    total = 0 if result is None else result.trials
    rows = []
    for task in tasks:
        state = states.get(task.task.workload_key)
        best = None if state is None else state.best_seconds
        gflops = None if best is None else task.task.flop_count / best / 1e9
        rows.append(
            {
                "kind": task.kind,
                "output": "x".join(str(d) for d in task.task.func.params[-1].shape),
                "weight": task.weight,
                "mflop": task.flop_count / 1e6,
                "worth_tuning": task.worth_tuning,
                "trials": None if state is None else state.trials,
                "share": None if state is None or not total else state.trials / total,
                "best_ms": None if best is None else best * 1e3,
                "gflops": gflops,
                "of_fma_peak": None if gflops is None or not peak else gflops / peak,
                "stopped": None if state is None else state.stopped,
                "in_model_ms": in_model.get(task.task.workload_key),
            }
        )
    return rows


def bench(
    name: str,
    size: Size,
    trials: int,
    conv_block: int | None,
    database: str | None,
    peak: float | None,
) -> dict[str, Any]:
    model = MODELS[name](np.random.default_rng(0), size)
    graph = import_onnx(model)
    inputs = {
        key: np.random.default_rng(1).standard_normal(kind.shape).astype(kind.dtype)
        for key, kind in graph.inputs.items()
    }
    tasks = extract_tasks(graph, conv_block=conv_block)
    gflop = sum(task.flop_count for task in tasks if not task.is_alternative) / 1e9
    shapes = ", ".join(str(a.shape) for a in inputs.values())
    print(f"== {name}: input {shapes}, {gflop:.2f} GFLOP")
    peer = onnxruntime_run(model, inputs)
    expected = peer()
    row: dict[str, Any] = {"gflop": gflop, "onnxruntime_ms": median_seconds(peer, ORT_RUNS) * 1e3}
    print(f"  onnxruntime {row['onnxruntime_ms']:.3f} ms")

    def check(module: GraphModule) -> dict[str, Any]:
        """Ours, with onnxruntime timed again just before each timing: a cloud host's
        speed drifts by 10 % over the minutes a tuning run takes, so only times taken
        side by side make a ratio."""
        return ours(module, inputs, expected, peer)

    row["default"] = check(GraphModule(graph, conv_block=conv_block))
    in_model = row["default"].pop("ms_by_workload")
    print_ours("default", row["default"])
    result = None
    if trials > 0:
        result, row["tuned"] = tuned(name, graph, tasks, trials, check, conv_block, database)
        in_model = row["tuned"].pop("ms_by_workload")
        row |= tuning_fields(result)
        print_ours("tuned", row["tuned"])
        print_tuning(row)
    row["tasks"] = task_rows(tasks, result, in_model, peak)
    print_tasks(row["tasks"])
    return row


def tuning_fields(result: ModelTuneResult) -> dict[str, Any]:
    estimate = result.estimated_seconds
    return {
        "tune_trials": result.trials,
        "tune_rounds": result.rounds,
        "tune_seconds": result.wall_seconds,
        "tune_time": result.time_text(),
        "tune_builds": result.work.builds,
        "tune_build_seconds": result.work.build_seconds,
        "tune_runs": result.work.runs,
        "tune_run_seconds": result.work.run_seconds,
        "tune_search_seconds": result.search_seconds,
        "estimated_ms": None if estimate is None else estimate * 1e3,
    }


def print_tuning(row: dict[str, Any]) -> None:
    estimate = "-" if row["estimated_ms"] is None else f"{row['estimated_ms']:.3f} ms"
    print(
        f"  tuning: {row['tune_trials']} trials in {row['tune_rounds']} rounds, "
        f"{row['tune_seconds']:.1f} s; the tuned tasks' estimated time {estimate}"
    )
    print(f"  tuning time: {row['tune_time']}")


def print_ours(label: str, measured: dict[str, Any]) -> None:
    verdict = "ok" if measured["matches_onnxruntime"] else f"DIFFERS (rtol {RTOL}, atol {ATOL})"
    print(
        f"  ours, {label:7} {measured['ms']:.3f} ms: {measured['vs_onnxruntime']:.2f}x "
        f"onnxruntime's speed (onnxruntime {measured['onnxruntime_ms']:.3f} ms beside it); "
        f"max abs error {measured['max_abs_error']:.2e} {verdict}"
    )
    print(
        f"    {measured['steps']} kernels; a run's time outside them (inputs, outputs, "
        f"calls): {measured['launch_us_per_step']:.1f} us per kernel"
    )
    costliest = measured["time_by_kind"][:TIME_ROWS]
    print(
        "    where the time goes: "
        + ", ".join(
            f"{r['kind']} x{r['steps']} {r['ms']:.3g} ms ({r['share']:.0%})" for r in costliest
        )
    )


def print_tasks(rows: list[dict[str, Any]]) -> None:
    """The tasks worth tuning, one a line, with the shape of their output (which of a
    model's convolutions it is); the rest (memory-bound groups on their default
    schedules) in one line."""
    width = max((len(row["kind"]) for row in rows), default=4)
    print(
        f"  {'task':{width}} {'output':18} {'weight':>6} {'MFLOP':>9} {'trials':>6} "
        f"{'share':>6} {'best ms':>9} {'GFLOP/s':>8} {'of peak':>7} {'in model':>9}"
    )
    for row in rows:
        if not row["worth_tuning"]:
            continue
        trials = "-" if row["trials"] is None else str(row["trials"])
        share = "-" if row["share"] is None else f"{row['share']:.0%}"
        best = "-" if row["best_ms"] is None else f"{row['best_ms']:.4g}"
        gflops = "-" if row["gflops"] is None else f"{row['gflops']:.1f}"
        of_peak = "-" if row["of_fma_peak"] is None else f"{row['of_fma_peak']:.0%}"
        in_model = "-" if row["in_model_ms"] is None else f"{row['in_model_ms']:.4g}"
        print(
            f"  {row['kind']:{width}} {row['output']:18} {row['weight']:>6} {row['mflop']:>9.2f} "
            f"{trials:>6} {share:>6} {best:>9} {gflops:>8} {of_peak:>7} {in_model:>9}"
        )
    rest = [row for row in rows if not row["worth_tuning"]]
    mflop = sum(row["mflop"] for row in rest)
    print(f"  and {len(rest)} memory-bound tasks ({mflop:.2f} MFLOP) on their default schedules")
    for row in rows:
        if row["stopped"]:
            print(f"  stopped early: {row['kind']} after {row['trials']} trials: {row['stopped']}")


def database_path(given: str | None, name: str, names: list[str]) -> str | None:
    """``--database``'s file for model ``name``: the path itself for one model, the path
    with the name before its suffix (``tune.resnet18.db``) for several."""
    if given is None or len(names) == 1:
        return given
    stem, suffix = os.path.splitext(given)
    return f"{stem}.{name}{suffix}"


def significant(value: Any) -> Any:
    """Floats to four significant digits: errors of 1e-6 and latencies of seconds alike."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {k: significant(v) for k, v in value.items()}
    if isinstance(value, list):
        return [significant(v) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000, help="budget per model; 0: none")
    parser.add_argument(
        "--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}"
    )
    parser.add_argument("--small", action="store_true", help="shrunken models, for a smoke run")
    parser.add_argument(
        "--conv-block",
        type=int,
        default=None,
        help="run each convolution in NCHW[b]c, b the widest of N and its halves (down to "
        "4) that its channels split into (default N: 16; 0: NCHW)",
    )
    parser.add_argument(
        "--database",
        metavar="PATH",
        help="tune into this SQLite file and keep it (default: a temporary one); with "
        "several models, each gets PATH with its name before the suffix",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(MODELS))
    if unknown or not names:
        parser.error(f"--models {args.models!r}: give some of {', '.join(MODELS)}")
    if args.trials < 0:
        parser.error("--trials must be 0 (default schedules only) or more")
    version = onnxruntime_version()
    if version is None:
        parser.error("onnxruntime is not installed: pip install -e '.[bench]'")
    cpu = machine()
    peak, nominal = measured_fma_peak_gflops(), nominal_fma_peak_gflops()
    nominal_text = "unknown" if nominal is None else f"{nominal:.0f}"
    print(f"{cpu}; onnxruntime {version}")
    print(f"FMA peak: measured {peak:.0f} GFLOP/s (nominal, at the base clock: {nominal_text})")
    size = SMALL if args.small else FULL
    if args.conv_block is not None and args.conv_block < 0:
        parser.error("--conv-block must be 0 (NCHW) or a block size")
    report = {
        name: bench(
            name,
            size,
            args.trials,
            args.conv_block,
            database_path(args.database, name, names),
            peak,
        )
        for name in names
    }
    if args.json:
        document = {
            "cpu": cpu,
            "onnxruntime": version,
            "trials": args.trials,
            "conv_block": args.conv_block,
            "fma_peak_gflops": peak,
            "nominal_fma_peak_gflops": nominal,
            "models": report,
        }
        print(json.dumps(significant(document)))
    if not all(
        check["matches_onnxruntime"]
        for row in report.values()
        for check in (row["default"], row.get("tuned"))
        if check is not None
    ):
        sys.exit(1)


if __name__ == "__main__":
    main()
