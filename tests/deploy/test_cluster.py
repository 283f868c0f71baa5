"""The compose topology, brought up without Docker and losing a node mid-job.

Inside a private network, PID and mount namespace (``ray_cluster``), the services
of docker-compose.yml run as processes with their compose commands
(``compose_topology``): PostgreSQL with its password secret, the one-shot
migration, a Ray head, two Ray workers (the second a host of OTHER_KIND), the API
alone and a coordinator on Ray Client. A job submitted over HTTP tunes two
workloads for two targets; once its first measurements are stored, the raylet of
the worker of this CPU's kind is killed with SIGKILL, and that worker's service is
started again, as its restart policy does. The job must finish with every trial
stored once, by a node that names itself and is of its target's kind.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from compose_topology import PG_USER, Topology
from ray_cluster import _descendants, isolation_unavailable, run_scenarios

from db import JobStatus, Purpose, SQLDatabase, TuningRecord
from tuner.client import Client
from workers.hosts import host_resource

pytestmark = pytest.mark.slow

OTHER_KIND = "llvm -mcpu=haswell"
TARGETS = ("llvm", OTHER_KIND)
WORKLOADS = (
    {"op": "matmul", "args": {"m": 48, "n": 40, "k": 32}},
    {"op": "relu", "args": {"shape": [64, 48]}},
)
TRIALS = 32
VARIABLES = {"RAY_HEAD_CPUS": "1", "RAY_WORKER_CPUS": "1", "WORKER_TARGET": "llvm"}
JOB_TIMEOUT_S = 400.0
NAMESPACE_TIMEOUT_S = 900
REPORT = "REPORT "


# ---- the scenario, run inside the namespace --------------------------------------------


def topology_a_job_survives_a_lost_worker_node(cluster: Any) -> None:
    topology = Topology({**os.environ, **VARIABLES})
    try:
        _run(topology)
    except BaseException:
        for name in ("migrate", "ray-head", "ray-worker-1", "ray-worker-2", "api", "coordinator"):
            print(f"---- {name}\n{topology.log_tail(name)}", flush=True)
        raise
    finally:
        topology.stop()


def _run(topology: Topology) -> None:
    began = time.monotonic()
    topology.start_postgres()
    topology.wait_healthy("postgres")
    migrated = topology.run_once("migrate")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    topology.start("ray-head")
    topology.wait_healthy("ray-head")
    this_kind = topology.start("ray-worker", name="ray-worker-1")
    topology.start("ray-worker", name="ray-worker-2", WORKER_TARGET=OTHER_KIND)
    topology.wait_healthy("ray-worker")
    nodes = _NodeBook()
    nodes.wait_for(3)
    for service in ("api", "coordinator"):
        topology.start(service)
    for service in ("api", "coordinator"):
        topology.wait_healthy(service)
    started = time.monotonic()

    client = Client("http://api:8000", topology.secret["admin_token"])
    job = client.submit(WORKLOADS, targets=TARGETS, trials=TRIALS, tuner="random")
    database = SQLDatabase(_database_url(topology))
    first = job["tasks"][0]
    _wait(lambda: database.count(first["workload_key"], first["target"]) > 0, "a first record")
    nodes.look()
    killed = _kill_raylet(this_kind.process.pid)
    _wait(lambda: this_kind.starts == 2, "the worker's restart")
    _wait(lambda: client.job(job["id"])["status"] in ("done", "failed"), "the job's end")
    nodes.look()
    ended = client.job(job["id"])
    assert ended["status"] == JobStatus.DONE.value, ended

    records = _check_every_trial_stored_once(database, ended)
    kinds = _check_each_kind_measured_on_its_nodes(records, nodes)
    nodes.close()  # the driver's log streaming would bury the report
    print(
        REPORT
        + json.dumps(
            {
                "startup_s": round(started - began, 1),
                "job_s": round(time.monotonic() - started, 1),
                "trials": len(records),
                "killed_raylet_pid": killed,
                "nodes_by_kind": kinds,
                "records_by_node": Counter(r.worker_host for r in records),
            }
        ),
        flush=True,
    )


def _database_url(topology: Topology) -> str:
    password = topology.secret["db_password"]
    return f"postgresql+psycopg://{PG_USER}:{password}@postgres:5432/{PG_USER}"


def _kill_raylet(ray_start_pid: int) -> int:
    """SIGKILL the raylet below a ``ray start --block`` process; returns its pid."""
    for pid in _descendants(ray_start_pid):
        if "raylet" in Path(f"/proc/{pid}/comm").read_text():
            os.kill(pid, signal.SIGKILL)
            return pid
    raise AssertionError(f"no raylet below process {ray_start_pid}")


def _check_every_trial_stored_once(database: SQLDatabase, job: dict[str, Any]) -> list[Any]:
    """Every task measured its trials (all of its space, when that is smaller), each
    trace once, and none of them was lost with the node (a candidate on the lost node
    was measured again elsewhere)."""
    records = []
    for task in job["tasks"]:
        assert 0 < task["trials_done"] == task["measured"] <= TRIALS, task
        found = database.records(
            task["workload_key"],
            task["target"],
            job_id=job["id"],
            purpose=Purpose.SEARCH,
            limit=10 * TRIALS,
        )
        assert len(found) == task["trials_done"], (task, [r.error for r in found])
        twice = [h for h, n in Counter(r.trace_hash for r in found).items() if n > 1]
        assert not twice, f"traces measured twice: {twice}"
        assert all(r.ok for r in found), [r.error for r in found if not r.ok]
        records += found
    return records


def _check_each_kind_measured_on_its_nodes(
    records: list[TuningRecord], nodes: _NodeBook
) -> dict[str, list[str]]:
    """Every record names its node, of its target's kind; the lost node's kind was
    measured on it and on the node that replaced it."""
    by_kind: dict[str, set[str]] = {}
    for record in records:
        node = nodes.of_host(record.worker_host)
        kind = host_resource(record.target)
        assert kind in node["Resources"], (record.worker_host, record.target, node["Resources"])
        by_kind.setdefault(kind, set()).add(node["NodeID"][:12])
    assert len(by_kind[host_resource("llvm")]) == 2, by_kind  # before and after the loss
    assert len(by_kind[host_resource(OTHER_KIND)]) == 1, by_kind
    return {kind: sorted(ids) for kind, ids in by_kind.items()}


class _NodeBook:
    """The Ray nodes seen so far, dead ones too, as a driver on the head sees them."""

    def __init__(self) -> None:
        import ray

        ray.init(address="127.0.0.1:6379", log_to_driver=False)
        self.seen: dict[str, dict[str, Any]] = {}

    def close(self) -> None:
        import ray

        ray.shutdown()

    def look(self) -> None:
        import ray

        for node in ray.nodes():
            if node["Alive"]:
                self.seen[node["NodeID"]] = node

    def wait_for(self, count: int) -> None:
        def enough() -> bool:
            self.look()
            return len(self.seen) >= count

        _wait(enough, f"{count} Ray nodes")

    def of_host(self, host: str) -> dict[str, Any]:
        """The node a record's ``worker_host`` (``address/node id prefix``) names."""
        address, _, prefix = host.partition("/")
        found = [n for n in self.seen.values() if n["NodeID"].startswith(prefix) and prefix]
        assert len(found) == 1 and found[0]["NodeManagerAddress"] == address, (host, found)
        return found[0]


def _wait(condition: Any, what: str, timeout_s: float = JOB_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout_s:g} s")
        time.sleep(0.5)


# ---- the test ----------------------------------------------------------------------------


def test_a_job_over_http_survives_a_lost_worker_node_of_the_compose_topology() -> None:
    reason = isolation_unavailable()
    if reason is not None:
        pytest.skip(f"the topology needs a private network namespace: {reason}")
    outcomes = run_scenarios(
        __file__, "topology_", worker_nodes=None, timeout_s=NAMESPACE_TIMEOUT_S
    )
    log = outcomes["_log"]
    for line in log["stdout"].splitlines():
        if line.startswith(REPORT):
            print(line)
    outcome = outcomes.get("topology_a_job_survives_a_lost_worker_node")
    assert outcome is not None, f"the scenario did not run\n{log['stdout']}\n{log['stderr']}"
    assert outcome["ok"], outcome["error"] + "\n" + log["stdout"][-4000:]
