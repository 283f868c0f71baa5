"""``tensortune ray-node``: the ``ray start`` command line it becomes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tuner.cli.commands import build_parser
from tuner.cli.errors import UsageError
from tuner.cli.node_commands import ray_start_argv
from workers.hosts import host_resource


def argv_of(*words: str) -> list[str]:
    return ray_start_argv(build_parser().parse_args(["ray-node", *words]))


def test_a_head_serves_ray_client_and_blocks() -> None:
    argv = argv_of("--head", "--num-cpus", "1")
    assert argv[:5] == [sys.executable, "-m", "ray.scripts.scripts", "start", "--block"]
    assert {"--head", "--port=6379", "--ray-client-server-port=10001", "--num-cpus=1"} <= set(argv)
    assert not any(word.startswith("--resources") for word in argv)


def test_a_worker_carries_the_resource_of_each_target() -> None:
    argv = argv_of(
        "--address", "ray-head:6379", "--target", "llvm -mcpu=haswell", "--target", "llvm"
    )
    (resources,) = [w.removeprefix("--resources=") for w in argv if w.startswith("--resources=")]
    assert json.loads(resources) == {
        host_resource("llvm -mcpu=haswell"): 1.0,
        host_resource("llvm"): 1.0,
    }
    assert "--address=ray-head:6379" in argv


def test_a_bad_address_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--address"):
        argv_of("--address", "ray-head")


@pytest.mark.parametrize(
    ("target", "named"), [("llvm -mcpu=no-such-cpu", "no-such-cpu"), ("cuda", "-arch")]
)
def test_a_bad_target_is_refused_as_it_is_read(target: str, named: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        argv_of("--head", "--target", target)
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err


def test_head_or_address_is_required() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tuner.cli.main", "ray-node", "--target", "llvm"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "--head" in done.stderr
