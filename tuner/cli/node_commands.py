"""``tensortune ray-node``: this host as a node of a tuning cluster.

A cluster is a Ray cluster: one head node (``--head``) that the coordinators join
(as drivers, through Ray Client on ``--client-port``) and worker nodes that join
the head (``--address``). ``--target T`` marks a node as a host of T's kind with
the Ray resource of ``workers.hosts``, so that a coordinator started with
``--route-by-target`` measures T's candidates there and nowhere else; a node with
no target builds candidates but measures none. The command becomes ``ray start
--block`` (it stays in the foreground, as a container's main process must, and
ends when the node's processes end), with usage statistics off unless
``$RAY_USAGE_STATS_ENABLED`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from tuner.cli.arguments import TARGET_FORMS, int_in_range, known_target
from tuner.cli.errors import UsageError
from workers import WorkersError
from workers.hosts import host_resource
from workers.ray_address import parse_address

DEFAULT_PORT = 6379
DEFAULT_CLIENT_PORT = 10001


def add_commands(commands: Any) -> None:
    node = commands.add_parser(
        "ray-node", help="run this host as a node of a tuning cluster (ray start, in front)"
    )
    where = node.add_mutually_exclusive_group(required=True)
    where.add_argument("--head", action="store_true", help="start a cluster: its head node")
    where.add_argument("--address", help="join the cluster whose head is at HOST:PORT")
    node.add_argument(
        "--port",
        type=int_in_range(1, 65535),
        default=DEFAULT_PORT,
        help=f"the head's port (default {DEFAULT_PORT})",
    )
    node.add_argument(
        "--client-port",
        type=int_in_range(1, 65535),
        default=DEFAULT_CLIENT_PORT,
        help=f"the head's Ray Client port, which coordinators join (default {DEFAULT_CLIENT_PORT})",
    )
    node.add_argument(
        "--target",
        action="append",
        default=[],
        type=known_target,
        metavar="TARGET",
        help=f"measure candidates of TARGET here (repeat for several): {TARGET_FORMS}",
    )
    node.add_argument(
        "--num-cpus", type=int_in_range(0), help="CPUs the node offers (default: all)"
    )
    node.add_argument("--num-gpus", type=int_in_range(0), help="GPUs the node offers")
    node.add_argument(
        "--object-store-memory", type=int_in_range(1), help="bytes of the object store"
    )
    node.add_argument(
        "--node-ip-address", help="the address other nodes reach this one at (default: found)"
    )
    node.set_defaults(run=run_ray_node, url=None)


def run_ray_node(url: str, args: argparse.Namespace) -> None:
    """Replace this process by ``ray start --block`` with the node's options."""
    argv = ray_start_argv(args)
    env = {"RAY_USAGE_STATS_ENABLED": "0", **os.environ}
    print(f"tensortune ray-node: {' '.join(argv[3:])}", file=sys.stderr, flush=True)
    os.execve(sys.executable, argv, env)


def ray_start_argv(args: argparse.Namespace) -> list[str]:
    """The ``ray start`` command line of ``args``, through this interpreter (so the Ray
    of this environment runs, with or without its script on PATH)."""
    argv = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block"]
    if args.head:
        argv += [
            "--head",
            f"--port={args.port}",
            f"--ray-client-server-port={args.client_port}",
            "--include-dashboard=false",
        ]
    else:
        try:
            parse_address(args.address)
        except WorkersError as err:
            raise UsageError(f"--address: {err}") from None
        argv.append(f"--address={args.address}")
    argv.append("--disable-usage-stats")
    resources = target_resources(args.target)
    if resources:
        argv.append(f"--resources={json.dumps(resources)}")
    for flag in ("num_cpus", "num_gpus", "object_store_memory", "node_ip_address"):
        value = getattr(args, flag)
        if value is not None:
            argv.append(f"--{flag.replace('_', '-')}={value}")
    return argv


def target_resources(targets: list[str]) -> dict[str, float]:
    """One Ray resource per host kind the targets name; a target that names none is a
    UsageError."""
    resources = {}
    for target in targets:
        try:
            resources[host_resource(target)] = 1.0
        except WorkersError as err:
            raise UsageError(f"--target {target!r}: {err}") from None
    return resources
