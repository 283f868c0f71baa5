"""Ray for tests: clusters inside a private network and PID namespace.

A test that needs Ray calls ``run_scenarios``: it runs this file as
``unshare --net --pid --fork --mount-proc python tests/support/ray_cluster.py ...``. Inside,
the only network interface is a fresh loopback, so every byte Ray sends stays on
127.0.0.1 of the namespace; and every process Ray starts lives in the namespace's
PID space, so when this file's process (PID 1 there) ends, the kernel ends them
all. Nothing outlives the test, ports never collide with anyone's, and no Ray
process outside is touched (``ray stop`` here sees only the namespace's own).

Inside, the file starts the cluster a test module asks for (a head node and
worker nodes with custom resources, by ``ray start``, or none: a scenario may
start Ray itself), connects a driver, and calls the module's scenario functions
(those whose names start with the given prefix, in the order they are defined)
with the ``Cluster``. Each prints one line ``SCENARIO {json}``: its name, whether
it passed, and the traceback if not. Scenarios share the cluster, so Ray starts
once per module.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

PORT = 6379
OBJECT_STORE_BYTES = 100 * 1024 * 1024
NAMESPACE = ["unshare", "--net", "--pid", "--fork", "--mount-proc"]
# Same auth mode and no usage stats for head, nodes and driver; health checks fast
# enough that a killed node is noticed in about a second.
RAY_ENV = {
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_health_check_initial_delay_ms": "0",
    "RAY_health_check_period_ms": "300",
    "RAY_health_check_timeout_ms": "300",
    "RAY_health_check_failure_threshold": "3",
}
MARK = "SCENARIO "
# Ray's command line through this interpreter: the ``ray`` script need not be on PATH
# (a virtual environment that is not activated), and no other Ray is picked up.
RAY_CLI = [sys.executable, "-m", "ray.scripts.scripts"]


def isolation_unavailable() -> str | None:
    """Why Ray tests cannot run here, or None when they can."""
    if importlib.util.find_spec("ray") is None:
        return "ray is not installed"
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    probe = subprocess.run([*NAMESPACE, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        return f"cannot make a network namespace: {probe.stderr.decode().strip()}"
    return None


def run_scenarios(
    module_path: str,
    prefix: str,
    *,
    worker_nodes: Sequence[Mapping[str, float]] | None,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run ``module_path``'s scenarios named ``prefix*`` in a fresh namespace, on a
    cluster of a head and one worker node per entry of ``worker_nodes`` (its custom
    resources), or with no cluster when None. Returns each scenario's outcome."""
    command = [*NAMESPACE, sys.executable, os.path.abspath(__file__), module_path, prefix]
    command.append(json.dumps(None if worker_nodes is None else list(worker_nodes)))
    full_env = {**os.environ, **RAY_ENV, **(env or {})}
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, env=full_env, check=False
        )
        stdout, stderr = done.stdout, done.stderr
    except subprocess.TimeoutExpired as err:
        stdout = _text(err.stdout)
        stderr = _text(err.stderr) + f"\n(the namespace ran past {timeout_s:g} s and was killed)"
    outcomes = {}
    for line in stdout.splitlines():
        if line.startswith(MARK):
            outcome = json.loads(line[len(MARK) :])
            outcomes[outcome["name"]] = outcome
    outcomes["_log"] = {"stdout": stdout[-4000:], "stderr": stderr[-8000:]}
    return outcomes


def _text(output: bytes | str | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


class Cluster:
    """A head node and worker nodes on 127.0.0.1, inside the namespace, and a driver
    connected to them. ``workers[k]`` is the ``ray start --block`` process of worker
    node k; the node's other processes run below it."""

    def __init__(self, worker_nodes: Sequence[Mapping[str, float]]) -> None:
        self.address = f"127.0.0.1:{PORT}"
        self.temp_dir = tempfile.mkdtemp(prefix="tt-ray-", dir="/tmp")
        self.workers: list[subprocess.Popen[bytes]] = []
        self._start_head()
        for resources in worker_nodes:
            self._start_worker(resources)
        self._connect(1 + len(worker_nodes))

    def _start_head(self) -> None:
        command = [*RAY_CLI, "start", "--head", f"--port={PORT}", *self._common()]
        command += ["--include-dashboard=false", "--disable-usage-stats"]
        command.append(f"--temp-dir={self.temp_dir}")
        subprocess.run(command, check=True, capture_output=True)

    def _start_worker(self, resources: Mapping[str, float]) -> None:
        command = [*RAY_CLI, "start", f"--address={self.address}", *self._common()]
        command += [f"--resources={json.dumps(dict(resources))}", "--block"]
        self.workers.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )

    @staticmethod
    def _common() -> list[str]:
        return [
            "--node-ip-address=127.0.0.1",
            "--num-cpus=1",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
        ]

    def _connect(self, nodes: int) -> None:
        import ray

        ray.init(address=self.address, log_to_driver=False)
        deadline = time.monotonic() + 60
        while len(self.alive_nodes()) < nodes:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(self.alive_nodes())} of {nodes} Ray nodes came up")
            time.sleep(0.1)

    @staticmethod
    def alive_nodes() -> list[dict[str, Any]]:
        import ray

        return [node for node in ray.nodes() if node["Alive"]]

    def node_with(self, resource: str) -> str:
        """The node id of the alive node that has ``resource``."""
        (node,) = [n["NodeID"] for n in self.alive_nodes() if resource in n["Resources"]]
        return node

    def head_node(self) -> str:
        return self.node_with("node:__internal_head__")

    def kill_worker(self, k: int) -> None:
        """Kill worker node k at once, as a machine dies: its ``ray start`` process and
        every process below it (raylet, workers, actors), all in one sweep."""
        tree = _descendants(self.workers[k].pid)
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.workers[k].wait()

    def stop(self) -> None:
        """Disconnect, end every process of the namespace, remove the temp dir.
        (``ray stop`` would do it too, but takes about 20 s.)"""
        import ray

        ray.shutdown()
        _end_namespace_processes()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def _end_namespace_processes() -> None:
    """SIGKILL every other process of this PID namespace and reap them. Only the
    namespace's init (PID 1) may do this: there, kill(-1) reaches the namespace's
    processes and nothing outside it."""
    if os.getpid() != 1:
        raise RuntimeError("only the init process of a private PID namespace ends all processes")
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        return
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _scenarios(module: Any, prefix: str) -> list[Any]:
    found = [
        fn
        for name, fn in inspect.getmembers(module, inspect.isfunction)
        if name.startswith(prefix) and fn.__module__ == module.__name__
    ]
    return sorted(found, key=lambda fn: fn.__code__.co_firstlineno)


def _load(path: str) -> Any:
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("ray_scenarios", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _report(name: str, ok: bool, seconds: float, error: str = "") -> None:
    line = json.dumps({"name": name, "ok": ok, "seconds": round(seconds, 2), "error": error})
    print(MARK + line, flush=True)


def main(argv: list[str]) -> int:
    """Inside the namespace: loopback up, cluster up, scenarios, cluster down."""
    module_path, prefix, nodes_json = argv
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    module = _load(module_path)
    worker_nodes = json.loads(nodes_json)
    start = time.monotonic()
    cluster = None
    try:
        if worker_nodes is not None:
            cluster = Cluster(worker_nodes)
        _report("_startup", True, time.monotonic() - start)
        for scenario in _scenarios(module, prefix):
            begun = time.monotonic()
            try:
                scenario(cluster)
            except BaseException:
                _report(scenario.__name__, False, time.monotonic() - begun, traceback.format_exc())
            else:
                _report(scenario.__name__, True, time.monotonic() - begun)
    except BaseException:
        _report("_startup", False, time.monotonic() - start, traceback.format_exc())
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
