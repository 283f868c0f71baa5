"""The Ray backend on real Ray, inside a private network namespace (see ray_cluster).

Ray runs only in a namespace of its own, so the checks are written as scenario
functions that ``ray_cluster`` runs there, all on one cluster started once for
this module: a head node and a worker node with the custom resource
``gpu_host``. Each test below asserts that its scenario passed. A second, smaller
namespace checks the backend starting a Ray of its own. The fault scenarios run the
builder and measurer of ``faulty_workers`` (its folder is on PYTHONPATH where the
nodes start).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from faulty_workers import BUILD_FUNCTION, MEASURER, TESTS_FOLDER, Fault, wait_for
from ray_cluster import Cluster, isolation_unavailable, run_scenarios
from worker_candidates import (
    BUILD_TIMEOUT_S,
    TEST_CONFIG,
    custom_candidate,
    illegal_candidate,
    kinds,
    matmul_candidate,
    slow_candidate,
    swapped_artifact,
)

import workers
from compiler.errors import ErrorKind
from workers import WorkersError
from workers.hosts import host_resource

RESOURCE = "gpu_host"
# A second kind of host, which this machine's CPU can stand in for.
OTHER_KIND = "llvm -mcpu=haswell"
CLUSTER_TIMEOUT_S = 300  # a bound for a loaded machine, not a wait
ON_DEMAND_TIMEOUT_S = 180
FAULTY = {"build_function": BUILD_FUNCTION, "measurer": MEASURER}
NODE_ENV = {"PYTHONPATH": os.pathsep.join([TESTS_FOLDER, os.environ.get("PYTHONPATH", "")])}


# ---- scenarios, run inside the namespace -----------------------------------------------


def cluster_good_candidates_on_every_node(cluster: Cluster) -> None:
    backend = workers.create(
        "ray", address=cluster.address, config=TEST_CONFIG, candidates_per_actor=2
    )
    with backend:
        hosts = backend.runner.hosts  # type: ignore[attr-defined]
        candidates = [matmul_candidate(seed) for seed in range(6)] + [custom_candidate()]
        cut = dataclasses.replace(slow_candidate(), cutoff_seconds=1e-3)
        results = backend.measure([*candidates, cut])
    assert len(hosts) == 2
    assert kinds(results) == [None] * len(results), [r.error for r in results]
    assert {r.worker_host for r in results} <= set(hosts)
    assert all(len(r.run_times) == TEST_CONFIG.repeat for r in results[:-1])
    assert results[-1].candidate == cut and len(results[-1].run_times) == 1


def cluster_runner_lands_on_the_node_with_the_resource(cluster: Cluster) -> None:
    node = cluster.node_with(RESOURCE)
    backend = workers.create(
        "ray", address=cluster.address, runner_resource=RESOURCE, config=TEST_CONFIG
    )
    with backend:
        hosts = backend.runner.hosts  # type: ignore[attr-defined]
        results = backend.measure([matmul_candidate(seed) for seed in range(3)])
    assert len(hosts) == 1 and node[:12] in hosts[0]
    assert all(r.ok and node[:12] in r.worker_host for r in results), results
    with pytest.raises(WorkersError, match="tpu_host"):
        workers.create("ray", address=cluster.address, runner_resource="tpu_host")


def cluster_candidates_go_only_to_nodes_of_their_target(cluster: Cluster) -> None:
    """The worker node is a host of OTHER_KIND and the head of no kind: candidates for
    OTHER_KIND are measured there, those for this CPU wait for a host of theirs and,
    none joining, are recorded as CRASHED with what to start."""
    worker = cluster.node_with(RESOURCE)
    backend = workers.create(
        "ray", address=cluster.address, config=TEST_CONFIG, route_by_target=True, host_wait_s=1.0
    )
    routed = [dataclasses.replace(matmul_candidate(s), target=OTHER_KIND) for s in range(3)]
    homeless = matmul_candidate(3)
    with backend:
        hosts = backend.runner.hosts  # type: ignore[attr-defined]
        results = backend.measure([routed[0], homeless, *routed[1:]])
    assert len(hosts) == 1 and worker[:12] in hosts[0]
    assert kinds(results) == [None, ErrorKind.CRASHED, None, None], [r.error for r in results]
    assert all(worker[:12] in r.worker_host for r in results if r.ok)
    assert "tensortune ray-node" in results[1].error and "--target 'llvm'" in results[1].error


def cluster_each_fault_costs_one_record(cluster: Cluster) -> None:
    backend = workers.create(
        "ray",
        address=cluster.address,
        runner_resource=RESOURCE,
        build_timeout_s=BUILD_TIMEOUT_S,
        config=TEST_CONFIG,
        **FAULTY,
    )
    candidates = [
        matmul_candidate(0),
        matmul_candidate(1, Fault.CRASH),
        matmul_candidate(2),
        matmul_candidate(0, Fault.HANG),
        matmul_candidate(3),
        matmul_candidate(0, Fault.BUILD_CRASH),
        matmul_candidate(1, Fault.BUILD_HANG),
        illegal_candidate(),
        matmul_candidate(4),
    ]
    with backend:
        results = backend.measure(candidates)
        swapped = backend.runner.run(
            [swapped_artifact(backend.builder), swapped_artifact(backend.builder, (9,))]
        )
    expected = [
        None,
        ErrorKind.CRASHED,
        None,
        ErrorKind.TIMEOUT,
        None,
        ErrorKind.CRASHED,
        ErrorKind.TIMEOUT,
        ErrorKind.BUILD_ERROR,
        None,
    ]
    assert kinds(results) == expected, [r.error for r in results]
    assert "runner actor died" in results[1].error
    assert "builder process died" in results[5].error
    assert kinds(swapped) == [ErrorKind.WRONG_RESULT, ErrorKind.RUN_ERROR]
    assert "numpy add" in swapped[0].error


def cluster_dead_node_candidates_move_to_another_host(cluster: Cluster) -> None:
    """Runs last: it kills the worker node while its runner is mid-candidate. Every
    candidate pauses until released; the worker node's runner says when it holds one,
    and only then is the node killed and the pauses released: no clock decides."""
    patient = dataclasses.replace(TEST_CONFIG, timeout_s=120.0)  # a pause is no timeout
    backend = workers.create("ray", address=cluster.address, config=patient, **FAULTY)
    head, worker = cluster.head_node(), cluster.node_with(RESOURCE)
    folder = Path(tempfile.mkdtemp(prefix="tt-pause-"))
    candidates = [matmul_candidate(seed, Fault.PAUSE, str(folder)) for seed in range(5)]

    def kill_the_worker_mid_candidate() -> None:
        (address,) = [
            n["NodeManagerAddress"] for n in cluster.alive_nodes() if n["NodeID"] == worker
        ]
        wait_for(folder / f"started-{address}_{worker[:12]}")
        cluster.kill_worker(0)
        (folder / "release").touch()

    with backend:
        builds = backend.builder.build(candidates)
        killer = threading.Thread(target=kill_the_worker_mid_candidate)
        killer.start()
        results = backend.runner.run(builds)
        killer.join()
        hosts = backend.runner.hosts  # type: ignore[attr-defined]
    assert kinds(results) == [None] * len(candidates), [r.error for r in results]
    assert len(hosts) == 1 and head[:12] in hosts[0]
    on_head = [r for r in results if head[:12] in r.worker_host]
    assert len(on_head) == len(candidates)  # the worker's candidate was measured again


def ondemand_ray_started_by_the_backend(cluster: Any) -> None:
    import ray

    assert cluster is None and not ray.is_initialized()
    backend = workers.create("ray", num_cpus=2, config=TEST_CONFIG, **FAULTY)
    assert ray.is_initialized()
    with backend:
        candidates = [matmul_candidate(0), matmul_candidate(1, Fault.CRASH), matmul_candidate(2)]
        results = backend.measure(candidates)
    assert kinds(results) == [None, ErrorKind.CRASHED, None], [r.error for r in results]
    assert not ray.is_initialized()


# ---- the tests ----------------------------------------------------------------------------


# The scenarios share one cluster of two nodes in private network namespaces, which takes
# 1.5 minutes on 2 cores to start and run: out of CI (pytest -m slow runs them);
# test_backend_starts_its_own_ray keeps a real Ray in every run.
CLUSTER = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster_outcomes() -> dict[str, dict[str, Any]]:
    reason = isolation_unavailable()
    if reason is not None:
        pytest.skip(f"Ray tests need a private network namespace: {reason}")
    return run_scenarios(
        __file__,
        "cluster_",
        worker_nodes=[{RESOURCE: 1, host_resource(OTHER_KIND): 1}],
        timeout_s=CLUSTER_TIMEOUT_S,
        env=NODE_ENV,
    )


def passed(outcomes: dict[str, dict[str, Any]], name: str) -> None:
    outcome = outcomes.get(name)
    log = outcomes["_log"]
    assert outcome is not None, f"{name} did not run\n{log['stdout']}\n{log['stderr']}"
    assert outcome["ok"], outcome["error"]


@CLUSTER
def test_cluster_starts(cluster_outcomes: dict[str, dict[str, Any]]) -> None:
    passed(cluster_outcomes, "_startup")


@CLUSTER
def test_good_candidates_on_every_node(cluster_outcomes: dict[str, dict[str, Any]]) -> None:
    passed(cluster_outcomes, "cluster_good_candidates_on_every_node")


@CLUSTER
def test_runner_lands_on_the_node_with_the_resource(
    cluster_outcomes: dict[str, dict[str, Any]],
) -> None:
    passed(cluster_outcomes, "cluster_runner_lands_on_the_node_with_the_resource")


@CLUSTER
def test_candidates_go_only_to_nodes_of_their_target(
    cluster_outcomes: dict[str, dict[str, Any]],
) -> None:
    passed(cluster_outcomes, "cluster_candidates_go_only_to_nodes_of_their_target")


@CLUSTER
def test_each_fault_costs_one_record(cluster_outcomes: dict[str, dict[str, Any]]) -> None:
    passed(cluster_outcomes, "cluster_each_fault_costs_one_record")


@CLUSTER
def test_dead_node_candidates_move_to_another_host(
    cluster_outcomes: dict[str, dict[str, Any]],
) -> None:
    passed(cluster_outcomes, "cluster_dead_node_candidates_move_to_another_host")


def test_backend_starts_its_own_ray() -> None:
    reason = isolation_unavailable()
    if reason is not None:
        pytest.skip(f"Ray tests need a private network namespace: {reason}")
    outcomes = run_scenarios(
        __file__,
        "ondemand_",
        worker_nodes=None,
        timeout_s=ON_DEMAND_TIMEOUT_S,
        env=NODE_ENV,
    )
    passed(outcomes, "_startup")
    passed(outcomes, "ondemand_ray_started_by_the_backend")
