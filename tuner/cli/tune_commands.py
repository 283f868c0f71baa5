"""The ``tensortune tune``, ``best`` and ``records`` commands (see ``tuner.cli.main``).

A workload is named on the command line as an op with ``--shape`` (its sizes:
matmul's M N K, conv2d's batch, channels, height, width, filters and kernel; or the
tensor shape of softmax, relu, add ...: ``tuner.cli.shape_args``) and
``--arg NAME=VALUE`` for its other arguments, as ``--spec`` (a spec's JSON text or a
file holding it), as a spec JSON file in place of the op, or, for ``best`` and
``records``, as a stored workload key. ``tune --space`` chooses the
space (``tuner.space_choice``): ``auto``, ``template``, ``generated`` or a schedule
function as ``module:function``. Input that names no workload, or no space that fits it,
raises UsageError, which the command line turns into exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

import db
import workers
from compiler.target.errors import TargetError
from compiler.workload.spec import WorkloadError, known_ops
from db import Database, Purpose, RecordError
from db.record import status_of
from tuner import search
from tuner.cli.arguments import add_target_argument, int_in_range
from tuner.cli.errors import UsageError
from tuner.cli.shape_args import shape_arguments
from tuner.cli.tables import format_table, milliseconds
from tuner.failures import one_line
from tuner.progress import Progress
from tuner.search import SearchError
from tuner.space import Space, SpaceError
from tuner.space_choice import choose_space
from tuner.task import TuneTask
from tuner.tune import (
    OPTION_RANGES,
    TuneOptions,
    TuneOptionsError,
    check_search,
    tune,
)
from workers.ray_address import parse_address

RAY_ADDRESS_VARIABLE = "TENSORTUNE_RAY_ADDRESS"
RAY_CONNECT_TIMEOUT_S = 30.0
MAX_RAY_CONNECT_TIMEOUT_S = 3600.0
# A workload key, or the start of one: ``records`` prints the first 12 characters.
KEY_PREFIX = re.compile(r"^[0-9a-f]{1,64}$")
MIN_KEY_PREFIX = 8


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a run; the message says what the database holds, so the command
    line can end with one line instead of a traceback (exit code 130)."""


def add_commands(commands: Any) -> None:
    """Add ``tune``, ``best`` and ``records`` to the ``tensortune`` subcommands."""
    tune_parser = commands.add_parser("tune", help="tune one workload on this machine")
    workload_arguments(tune_parser)
    tune_parser.add_argument("--trials", type=int, default=64, help="trial budget (default 64)")
    tune_parser.add_argument(
        "--tuner",
        choices=[search.AUTO, *sorted(search.KINDS)],
        default=search.AUTO,
        help="search (default: auto, xgb over a template, evolutionary over other spaces)",
    )
    tune_parser.add_argument("--batch-size", type=int, default=16, help="trials per batch")
    tune_parser.add_argument("--early-stopping", type=int, help="stop after N trials no faster")
    tune_parser.add_argument("--seed", type=int, default=0, help="seed of every choice")
    tune_parser.add_argument(
        "--space",
        default="auto",
        help="auto (the template that fits, else the generated space), template, "
        "generated, or a schedule function as module:function (default: auto)",
    )
    tune_parser.add_argument("--template", help="template name (default: the one that fits)")
    tune_parser.add_argument(
        "--no-transfer",
        dest="transfer",
        action="store_false",
        help="do not learn from the records of similar workloads",
    )
    worker_arguments(tune_parser)
    tune_parser.set_defaults(run=run_tune)

    best = commands.add_parser("best", help="the best stored schedule of a workload")
    workload_arguments(best, key=True)
    best.add_argument("--json", action="store_true", help="print the trace JSON instead")
    best.set_defaults(run=run_best)

    records = commands.add_parser("records", help="stored records, newest first")
    workload_arguments(records, key=True, required=False)
    records.add_argument("--limit", type=int, default=20, help="records per page (default 20)")
    records.add_argument(
        "--before", type=int_in_range(1), help="page on: records older than this id"
    )
    records.set_defaults(run=run_records)


def worker_arguments(parser: argparse.ArgumentParser) -> None:
    """``--workers``, ``--ray-address`` (default ``$TENSORTUNE_RAY_ADDRESS``),
    ``--ray-connect-timeout`` and ``--route-by-target`` (see ``backend_of``)."""
    parser.add_argument("--workers", choices=workers.KINDS, default="local")
    parser.add_argument(
        "--ray-address",
        default=os.environ.get(RAY_ADDRESS_VARIABLE) or None,
        help=f"a Ray cluster to use (implies --workers ray; default ${RAY_ADDRESS_VARIABLE})",
    )
    parser.add_argument(
        "--route-by-target",
        action="store_true",
        help="measure each candidate only on a Ray node marked for its target "
        "(tensortune ray-node --target)",
    )
    parser.add_argument(
        "--ray-connect-timeout",
        type=float,
        default=RAY_CONNECT_TIMEOUT_S,
        help=f"seconds to wait for the Ray cluster to answer (default {RAY_CONNECT_TIMEOUT_S:g})",
    )


def workload_arguments(
    parser: argparse.ArgumentParser, *, key: bool = False, required: bool = True
) -> None:
    what = "an op, a spec JSON file" + (" or a workload key" if key else "")
    parser.add_argument("workload", nargs="?", help=what)
    parser.add_argument(
        "--shape", type=int, nargs="+", help="the op's sizes (matmul: M N K) or tensor shape"
    )
    parser.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another argument of the op, VALUE as JSON or a word (stride=2, activation=relu)",
    )
    parser.add_argument("--spec", help="a workload spec as JSON text or a JSON file")
    parser.add_argument(
        "--constant",
        action="append",
        default=[],
        metavar="INPUT",
        help="an input whose data is the same in every call (a weight: dense's W, conv2d's "
        "kernel); its schedule may store it in its own layout, converted once at build time",
    )
    add_target_argument(parser)
    parser.add_argument("--url", "--db", dest="url", help="database URL (default: SQLite)")
    parser.set_defaults(workload_required=required)


# ---- commands ------------------------------------------------------------------------


def run_tune(url: str, args: argparse.Namespace) -> None:
    task = _task(args)
    options = _tune_options(args)
    searched = _space(task, args.space, options)
    kind, backend_options = backend_of(args)
    try:
        with db.create(url) as database, workers.create(kind, **backend_options) as backend:
            progress = Progress(options.trials, label=repr(task))
            result = tune(
                task,
                database=database,
                workers=backend,
                options=options,
                progress=progress,
                space=searched,
            )
    except KeyboardInterrupt:
        raise Interrupted(_stored_after_interrupt(url, task)) from None
    print(format_table(result))
    if result.interrupted:
        raise Interrupted(_stored_after_interrupt(url, task))


def run_best(url: str, args: argparse.Namespace) -> None:
    with db.create(url) as database:
        key, target = _key_and_target(args, database)
        top = database.best(key, target)
        flops = _flop_count(database, key)
    if not top:
        raise RecordError(
            f"no successful record of workload {key[:12]} on {target!r}; tune it first "
            "(tensortune tune ...)"
        )
    record = top[0]
    if args.json:
        print(record.trace)
        return
    print("\n".join(record.to_trace().as_python()))
    seconds = record.seconds
    assert seconds is not None
    gflops = None if flops is None else flops / seconds / 1e9
    retimed = record.purpose is Purpose.RETIME
    print(describe_best(key, target, seconds, gflops, retimed, len(record.run_times), record.id))


def describe_best(
    key: str,
    target: str,
    seconds: float,
    gflops: float | None,
    retimed: bool,
    runs: int,
    record_id: int,
) -> str:
    """The comment line under a best schedule: its time, rate, and how it was timed."""
    rate = "" if gflops is None else f", {gflops:.2f} GFLOP/s"
    how = f"re-timed: fastest of {runs} runs" if retimed else "as measured by the search"
    return f"# {key[:12]} on {target}: {seconds * 1e3:.4g} ms{rate}, {how} (record {record_id})"


def run_records(url: str, args: argparse.Namespace) -> None:
    if not 1 <= args.limit <= 10_000:
        raise UsageError(f"--limit must be from 1 to 10000, got {args.limit}")
    with db.create(url) as database:
        key, target = (None, None)
        if args.workload or args.spec:
            key, target = _key_and_target(args, database)
        page = database.records(key, target, limit=args.limit, before_id=args.before)
    print(f"{'id':>7}  {'workload':12}  {'status':12}  {'ms':>10}  {'purpose':7}  target  error")
    for record in page:
        ms = milliseconds(record.seconds)
        status = status_of(record.error_kind)
        error = f"  {one_line(record.error)}" if record.error else ""
        print(
            f"{record.id:>7}  {record.workload_key[:12]}  {status:12}  {ms:>10}  "
            f"{record.purpose.value:7}  {record.target}{error}"
        )
    if len(page) == args.limit:
        print(f"more: --before {page[-1].id}")


def backend_of(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The workers kind and its options, the Ray address and timeout checked."""
    if args.ray_address is None and args.workers != "ray":
        if args.route_by_target:
            raise UsageError("--route-by-target routes among Ray nodes; add --workers ray")
        return args.workers, {}
    timeout = args.ray_connect_timeout
    if not 0 < timeout <= MAX_RAY_CONNECT_TIMEOUT_S:
        raise UsageError(
            f"--ray-connect-timeout must be more than 0 and at most "
            f"{MAX_RAY_CONNECT_TIMEOUT_S:g} seconds, got {timeout:g}"
        )
    if args.ray_address is not None:
        try:
            parse_address(args.ray_address)
        except workers.WorkersError as err:
            raise UsageError(f"--ray-address: {err}") from err
    return "ray", {
        "address": args.ray_address,
        "connect_timeout_s": timeout,
        "route_by_target": args.route_by_target,
    }


def _stored_after_interrupt(url: str, task: TuneTask) -> str:
    """What an interrupted run leaves: the workload's stored records, all kept."""
    try:
        with db.create(url) as database:
            stored = database.count(task.workload_key, task.target)
            ok = database.count(task.workload_key, task.target, ok=True)
    except db.DatabaseError as err:
        return f"interrupted before the database was ready ({err}); run the command again"
    return (
        f"interrupted; {stored} records of {task!r} are stored ({ok} successful); "
        "run the same command again to resume"
    )


# ---- reading the command line ----------------------------------------------------------


def _task(args: argparse.Namespace) -> TuneTask:
    spec = spec_from_arguments(args)
    try:
        return TuneTask.from_spec(spec, args.target)
    except (WorkloadError, TargetError) as err:
        raise UsageError(str(err)) from err


def _tune_options(args: argparse.Namespace) -> TuneOptions:
    """The options, every one checked (``TuneOptions`` checks the ranges) before a
    worker starts or anything is stored."""
    try:
        return TuneOptions(
            trials=args.trials,
            tuner=args.tuner,
            batch_size=args.batch_size,
            early_stopping=args.early_stopping,
            seed=args.seed,
            template=args.template,
            transfer=args.transfer,
        )
    except TuneOptionsError as err:
        low, high = OPTION_RANGES[err.option]
        value = getattr(args, err.option)
        flag = "--" + err.option.replace("_", "-")
        raise UsageError(f"{flag} must be at least {low} and at most {high}, got {value}") from err


def _space(task: TuneTask, choice: str, options: TuneOptions) -> Space:
    """The space ``--space`` chooses, made before any worker starts, so that a choice
    that does not fit (or a schedule function that cannot be loaded) is bad input. A
    function's module is looked for in the current folder too, as ``python -m`` does."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        chosen = choose_space(
            choice, task.func, target=task.target, template=options.template, seed=options.seed
        )
    except SpaceError as err:
        raise UsageError(f"--space: {err}") from err
    try:
        check_search(chosen, options)
    except SearchError as err:
        raise UsageError(f"--tuner {options.tuner}: {err}") from err
    return chosen


def spec_from_arguments(args: argparse.Namespace) -> dict[str, Any]:
    spec = _spec_without_constants(args)
    if not args.constant:
        return spec
    given = spec.get("constants", [])
    if not isinstance(given, list):
        raise UsageError(f"the spec's constants must be a list of input names, got {given!r}")
    return {**spec, "constants": sorted({*given, *args.constant})}


def _spec_without_constants(args: argparse.Namespace) -> dict[str, Any]:
    if args.spec is not None:
        if args.workload is not None or args.shape is not None or args.arg:
            raise UsageError("give either --spec or an op with --shape/--arg, not both")
        return _as_dict(_load_json(args.spec))
    workload = args.workload
    if workload is None:
        raise UsageError("name a workload: an op with --shape (matmul --shape M N K) or --spec")
    if workload.endswith(".json") or os.path.isfile(workload):
        if args.shape is not None or args.arg:
            raise UsageError("--shape and --arg go with an op name, not with a spec file")
        return _as_dict(_load_json(workload))
    if workload not in known_ops():
        raise UsageError(f"unknown op {workload!r}; the ops are {', '.join(known_ops())}")
    try:
        return shape_arguments(workload).spec(args.shape, _named_arguments(args.arg))
    except WorkloadError as err:
        raise UsageError(f"{err} (or give the whole spec: --spec '{{\"op\": ...}}')") from None


def _named_arguments(pairs: list[str]) -> dict[str, Any]:
    """``--arg NAME=VALUE`` pairs as spec arguments; VALUE is JSON, or else a word."""
    named: dict[str, Any] = {}
    for pair in pairs:
        name, equals, text = pair.partition("=")
        if not equals or not name.strip():
            raise UsageError(f"--arg {pair!r}: give NAME=VALUE (e.g. --arg stride=2)")
        if name.strip() in named:
            raise UsageError(f"--arg {name.strip()} is given twice; give it once")
        try:
            named[name.strip()] = json.loads(text)
        except json.JSONDecodeError:
            named[name.strip()] = text
    return named


def _as_dict(spec: Any) -> dict[str, Any]:
    """The spec as read; ``TuneTask.from_spec`` checks and normalizes it, once."""
    if not isinstance(spec, dict):
        raise UsageError(f"a spec must be a JSON object with 'op' and 'args', got {spec!r}")
    return spec


def _load_json(text_or_path: str) -> Any:
    text = text_or_path
    if not text_or_path.lstrip().startswith("{"):
        try:
            with open(text_or_path) as file:
                text = file.read()
        except (OSError, UnicodeDecodeError) as err:
            raise UsageError(f"cannot read the spec file {text_or_path!r}: {err}") from err
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"the spec {text_or_path!r} is not valid JSON: {err}") from err


def _key_and_target(args: argparse.Namespace, database: Database) -> tuple[str, str]:
    """The workload the arguments name, as a stored key, and the canonical target."""
    workload = args.workload
    if workload and args.spec is None and names_a_key(workload):
        from compiler.target.parse import canonical_target

        try:
            target = canonical_target(args.target)
        except TargetError as err:
            raise UsageError(str(err)) from err
        return _stored_key(database, workload), target
    task = _task(args)
    return task.workload_key, task.target


def names_a_key(workload: str) -> bool:
    """Whether ``workload`` is meant as a key (or the start of one): hex, and neither an
    op (``add`` is hex too) nor a file."""
    return (
        bool(KEY_PREFIX.match(workload))
        and workload not in known_ops()
        and not (os.path.isfile(workload))
    )


def _stored_key(database: Database, prefix: str) -> str:
    """The one stored workload key that starts with ``prefix``."""
    if len(prefix) < MIN_KEY_PREFIX:
        raise UsageError(
            f"workload key {prefix!r} is too short: give at least {MIN_KEY_PREFIX} of its "
            "hex characters (tensortune records prints 12)"
        )
    keys = [entry.key for entry in database.workloads() if entry.key.startswith(prefix)]
    if not keys:
        raise UsageError(
            f"no stored workload key starts with {prefix!r}; tensortune records lists them"
        )
    if len(keys) > 1:
        raise UsageError(
            f"workload key {prefix!r} is ambiguous: {len(keys)} stored keys start with it "
            f"({', '.join(key[:16] for key in keys)}); give more of its characters"
        )
    return keys[0]


def _flop_count(database: Database, key: str) -> int | None:
    try:
        return database.workload(key).flop_count
    except RecordError:
        return None
