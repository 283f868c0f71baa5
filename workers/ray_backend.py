"""The Ray backend: builders as Ray tasks, runners as Ray actors, one per host.

The same code runs on a Ray started on demand in this process (no address) and
on a cluster joined by address (``ray start --head`` on one host, ``ray start
--address=...`` on the others). Runner hosts are chosen by a Ray resource: every
alive node that has it gets one runner actor, pinned there, which measures one
candidate at a time. With ``route_by_target``, a candidate is measured only on a
node that carries its target's host-kind resource (``workers.hosts``), so a cluster
of several kinds of hosts times each target on its own hardware; nodes that join
later (a new host, a restarted one) get a runner at the next batch. Candidates of a
cuda target go to runners of their own, one per GPU of a node (each actor holds
``num_gpus=1``, and its share of the node's cuda host-kind resources), made when
the first such candidate comes.

Faults: a build task that crashes is a CRASHED record (a crash that coincides
with a lost node is retried once elsewhere); one past its deadline is cancelled
(its worker killed) and recorded as TIMEOUT. A runner actor that reports a CRASHED
candidate itself (a GPU kernel faulted its CUDA context) is replaced by a fresh one.
A runner actor that dies or passes its deadline is restarted (``max_restarts``) and
pinged: if it comes back, the candidate it held is recorded (CRASHED or TIMEOUT);
if it cannot come back, its node is gone, the actor is dropped and the candidate
goes to another host, up to ``node_retries`` times, else it is recorded as CRASHED.
When no live host can take a candidate, the runner waits up to ``host_wait_s`` for
one to join (a restarted node comes back as a new one) before recording it as
CRASHED. No candidate is dropped.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, RayError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from compiler.errors import ErrorKind
from workers.base import (
    BUILD_FUNCTION,
    GPU_MEASURER,
    MEASURER,
    RUNNER_ENV,
    Builder,
    BuildResult,
    Candidate,
    MeasureConfig,
    Runner,
    RunResult,
    Workers,
    WorkersError,
    load_hook,
)
from workers.hosts import PREFIX, host_resource, is_gpu_target, served_targets
from workers.ray_address import check_reachable

DEFAULT_CONNECT_TIMEOUT_S = 30.0
# How often a runner with work and no host for it looks for new nodes.
HOST_POLL_S = 0.5

logger = logging.getLogger(__name__)


def connect(
    address: str | None,
    num_cpus: int | None = None,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> bool:
    """Join the Ray cluster at ``address`` or, without one, start a Ray in this
    process (no dashboard). True when this call connected, so the caller shuts the
    connection down when done; False when this process was already connected. An
    address where no cluster answers within ``connect_timeout_s`` is a WorkersError
    (``workers.ray_address``), not minutes of Ray retrying."""
    if ray.is_initialized():
        return False
    if address is None:
        ray.init(num_cpus=num_cpus, include_dashboard=False)
        return True
    check_reachable(address, connect_timeout_s)
    try:
        ray.init(address=address)
    except ConnectionError as err:
        raise WorkersError(
            f"cannot join the Ray cluster at {address!r}: {_first_line(err)}; check that "
            "the address is the one its head node printed"
        ) from None
    return True


def create_ray(
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    runner_resource: str | None = None,
    route_by_target: bool = False,
    host_wait_s: float = 120.0,
    build_resources: Mapping[str, float] | None = None,
    build_timeout_s: float = 30.0,
    max_in_flight: int | None = None,
    node_retries: int = 2,
    candidates_per_actor: int = 500,
    config: MeasureConfig | None = None,
    build_function: str = BUILD_FUNCTION,
    measurer: str = MEASURER,
    gpu_measurer: str = GPU_MEASURER,
) -> Workers:
    """Connect (see ``connect``), then a RayBuilder and a RayRunner; closing the
    Workers disconnects again if this call connected. ``build_function``, ``measurer``
    and ``gpu_measurer`` name the code the tasks and actors run
    (``workers.base.load_hook``)."""
    connected = connect(address, num_cpus, connect_timeout_s)
    try:
        builder = RayBuilder(
            timeout_s=build_timeout_s,
            max_in_flight=max_in_flight,
            resources=build_resources,
            build_function=build_function,
        )
        runner = RayRunner(
            config=config,
            resource=runner_resource,
            route_by_target=route_by_target,
            host_wait_s=host_wait_s,
            node_retries=node_retries,
            candidates_per_actor=candidates_per_actor,
            measurer=measurer,
            gpu_measurer=gpu_measurer,
        )
    except BaseException:
        if connected:
            ray.shutdown()
        raise
    return Workers(builder, runner, ray.shutdown if connected else None)


def alive_nodes() -> list[dict[str, Any]]:
    return [node for node in ray.nodes() if node["Alive"]]


@ray.remote(max_retries=0)
def _build_task(
    candidate: dict[str, Any], build_function: str
) -> tuple[dict[str, Any], bytes | None]:
    result = load_hook(build_function)(Candidate.from_json(candidate))
    return result.header(), None if result.artifact is None else result.artifact.library


class RayBuilder(Builder):
    """Builds each candidate as a Ray task with ``resources`` (default: one CPU), at
    most ``max_in_flight`` at once (default: the cluster's CPUs), calling the function
    ``build_function`` names."""

    def __init__(
        self,
        *,
        timeout_s: float = 30.0,
        max_in_flight: int | None = None,
        resources: Mapping[str, float] | None = None,
        build_function: str = BUILD_FUNCTION,
    ) -> None:
        if not timeout_s > 0:
            raise ValueError(f"RayBuilder: timeout_s must be positive, got {timeout_s}")
        load_hook(build_function)
        self.build_function = build_function
        self.timeout_s = timeout_s
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.max_in_flight = max(1, max_in_flight if max_in_flight is not None else cpus)
        self._task = _build_task.options(resources=dict(resources or {}))

    def stream(self, candidates: Sequence[Candidate]) -> Iterator[tuple[int, BuildResult]]:
        pending = deque(range(len(candidates)))
        retried: set[int] = set()
        in_flight: dict[ray.ObjectRef, tuple[int, float]] = {}
        nodes = _node_ids()
        try:
            while pending or in_flight:
                while pending and len(in_flight) < self.max_in_flight:
                    index = pending.popleft()
                    ref = self._task.remote(candidates[index].to_json(), self.build_function)
                    deadline = time.monotonic() + self.timeout_s
                    in_flight[ref] = (index, deadline)
                earliest = min(deadline for _, deadline in in_flight.values())
                timeout = max(0.0, earliest - time.monotonic())
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=timeout)
                for ref in ready:
                    index, _ = in_flight.pop(ref)
                    result = self._result(ref, candidates[index], nodes, index not in retried)
                    if result is None:
                        retried.add(index)
                        pending.appendleft(index)
                    else:
                        yield index, result
                yield from self._expire(in_flight, candidates)
        finally:
            for ref in in_flight:
                ray.cancel(ref, force=True)

    def _result(
        self, ref: ray.ObjectRef, candidate: Candidate, nodes: frozenset[str], may_retry: bool
    ) -> BuildResult | None:
        """The build's result; None when it may have been lost with a node (one of
        ``nodes``, alive when the batch started, is gone) and may be retried."""
        try:
            header, library = ray.get(ref)
        except RayTaskError as err:
            message = f"the build function raised instead of returning a result: {err}"
            return BuildResult.failed(candidate, ErrorKind.INTERNAL, message)
        except RayError as err:
            if nodes - _node_ids():
                if may_retry:
                    return None
                message = f"the node building this candidate was lost: {_first_line(err)}"
                return BuildResult.failed(candidate, ErrorKind.HOST_LOST, message)
            message = f"the builder process died building this candidate: {_first_line(err)}"
            return BuildResult.failed(candidate, ErrorKind.CRASHED, message)
        return BuildResult.from_header(header, library)

    def _expire(
        self,
        in_flight: dict[ray.ObjectRef, tuple[int, float]],
        candidates: Sequence[Candidate],
    ) -> Iterator[tuple[int, BuildResult]]:
        now = time.monotonic()
        for ref, (index, deadline) in list(in_flight.items()):
            if deadline <= now and not ray.wait([ref], timeout=0)[0]:
                ray.cancel(ref, force=True)
                del in_flight[ref]
                message = f"building took longer than {self.timeout_s:g} s; its task was killed"
                yield index, BuildResult.failed(candidates[index], ErrorKind.TIMEOUT, message)

    def close(self) -> None:
        """Nothing to release: tasks end with the batch."""


class _Runner:
    """Measures candidates on its node with a measurer of the class ``measurer`` names."""

    def __init__(self, host: str, measurer: str) -> None:
        _undo_ray_thread_limit()
        self._measurer = load_hook(measurer)(host=host)

    def ping(self) -> bool:
        return True

    def prepare(self, candidate: dict[str, Any], config: dict[str, Any]) -> str | None:
        return self._measurer.prepare(
            Candidate.from_json(candidate), MeasureConfig.from_json(config)
        )

    def measure(
        self, build: dict[str, Any], library: bytes, config: dict[str, Any]
    ) -> dict[str, Any]:
        result = BuildResult.from_header(build, library)
        return self._measurer.measure(result, MeasureConfig.from_json(config)).to_json()


# Made an actor by a call rather than a decorator, so that type checkers see the class
# Ray makes (with ``options``) instead of the plain one.
_RunnerActor = ray.remote(_Runner)


@dataclass
class _Task:
    """What a runner slot is doing: ``phase`` is prepare, measure, or revive (pinging
    the restarted actor; ``failure`` is the record to keep if it answers)."""

    index: int
    phase: str
    deadline: float
    failure: RunResult | None = None


@dataclass
class _Slot:
    """A runner actor's place: its node, the host kinds it measures and, for one that
    measures on a GPU, the share of the node's host-kind resources it holds."""

    actor: Any
    node_id: str
    host: str
    serves: frozenset[str]
    gpu: bool = False
    claim: Mapping[str, float] = field(default_factory=dict)
    alive: bool = True
    prepared: set[str] = field(default_factory=set)
    served: int = 0
    task: _Task | None = None


class RayRunner(Runner):
    """One runner actor on every alive node that has ``resource`` (every node when
    None), each measuring one candidate at a time.

    With ``route_by_target``, only nodes that carry a host-kind resource
    (``workers.hosts``) get a runner, and each candidate goes to a node of its
    target's kind. ``host_wait_s`` is how long candidates that no live node can take
    wait for one to join. ``revive_timeout_s`` is how long a restarted actor may take
    to answer before its host counts as lost; a lost host's candidates move to other
    hosts, each at most ``node_retries`` times. An actor is replaced by a fresh one on
    its node after ``candidates_per_actor`` candidates, since a process keeps every
    library it has loaded mapped until it ends. ``measurer`` names the class that
    measures in an actor, ``gpu_measurer`` the one in a GPU runner's actor.
    """

    def __init__(
        self,
        *,
        config: MeasureConfig | None = None,
        resource: str | None = None,
        route_by_target: bool = False,
        host_wait_s: float = 120.0,
        node_retries: int = 2,
        revive_timeout_s: float = 30.0,
        candidates_per_actor: int = 500,
        measurer: str = MEASURER,
        gpu_measurer: str = GPU_MEASURER,
    ) -> None:
        if candidates_per_actor < 1:
            raise ValueError(
                f"RayRunner: candidates_per_actor must be at least 1, got {candidates_per_actor}"
            )
        if not host_wait_s >= 0:
            raise ValueError(f"RayRunner: host_wait_s must be 0 or more, got {host_wait_s}")
        load_hook(measurer)
        load_hook(gpu_measurer)
        self.measurer = measurer
        self.gpu_measurer = gpu_measurer
        self._gpus_wanted = False
        self.config = config or MeasureConfig()
        self.resource = resource
        self.route_by_target = route_by_target
        self.host_wait_s = host_wait_s
        self.node_retries = node_retries
        self.revive_timeout_s = revive_timeout_s
        self.candidates_per_actor = candidates_per_actor
        self._slots: list[_Slot] = []
        self._join_new_nodes()
        if not self._slots and not route_by_target:
            have = sorted({name for n in alive_nodes() for name in n["Resources"]})
            raise WorkersError(
                f"RayRunner: no alive Ray node has resource {resource!r}; the nodes have "
                f"{', '.join(have)}; start a node with --resources='{{\"{resource}\": 1}}'"
            )

    def _join_new_nodes(self) -> None:
        """A runner on every alive node that should have one and has none yet, and,
        once cuda candidates came, one per GPU of every node that should have them."""
        known = {(slot.node_id, slot.gpu) for slot in self._slots}
        for node in alive_nodes():
            resources = node["Resources"]
            if self.resource and resources.get(self.resource, 0) <= 0:
                continue
            serves = served_targets(resources)
            gpu_kinds = frozenset(k for k in serves if is_gpu_target(k.removeprefix(PREFIX)))
            cpu_kinds = serves - gpu_kinds
            if (node["NodeID"], False) not in known and (cpu_kinds or not self.route_by_target):
                self._slots.append(self._place(node, cpu_kinds))
            if not self._gpus_wanted or (node["NodeID"], True) in known:
                continue
            if gpu_kinds or not self.route_by_target:
                self._slots.extend(self._place_gpus(node, gpu_kinds))

    def _place(self, node: Mapping[str, Any], serves: frozenset[str]) -> _Slot:
        node_id = node["NodeID"]
        host = f"{node['NodeManagerAddress']}/{node_id[:12]}"
        logger.info("runner on node %s (%s)", host, ", ".join(sorted(serves)) or "any target")
        slot = _Slot(None, node_id, host, serves)
        slot.actor = self._new_actor(slot)
        return slot

    def _place_gpus(self, node: Mapping[str, Any], serves: frozenset[str]) -> list[_Slot]:
        """One GPU runner per GPU of ``node``, each claiming its share of the node's
        host-kind resources (rounded down to the 1e-4 that Ray counts in)."""
        node_id = node["NodeID"]
        gpus = int(node["Resources"].get("GPU", 0))
        if gpus == 0:
            return []
        shares = {k: math.floor(node["Resources"][k] / gpus * 1e4) / 1e4 for k in serves}
        claim = {k: share for k, share in shares.items() if share > 0}
        slots = []
        for index in range(gpus):
            host = f"{node['NodeManagerAddress']}/{node_id[:12]}/gpu{index}"
            logger.info("GPU runner on %s (%s)", host, ", ".join(sorted(serves)) or "any GPU")
            slot = _Slot(None, node_id, host, serves, gpu=True, claim=claim)
            slot.actor = self._new_actor(slot)
            slots.append(slot)
        return slots

    def _new_actor(self, slot: _Slot) -> Any:
        if slot.gpu:
            return _new_actor(
                slot.node_id, slot.host, self.gpu_measurer, num_gpus=1, resources=slot.claim
            )
        return _new_actor(slot.node_id, slot.host, self.measurer)

    def _renew(self, slot: _Slot) -> None:
        """A fresh actor on the slot's node in place of the old one."""
        ray.kill(slot.actor, no_restart=True)
        slot.actor = self._new_actor(slot)
        slot.prepared.clear()
        slot.served = 0

    @property
    def hosts(self) -> list[str]:
        """The hosts that still have a runner, as results name them."""
        return [slot.host for slot in self._slots if slot.alive]

    def _takes(self, slot: _Slot, build: BuildResult) -> bool:
        """Whether ``slot``'s runner may measure ``build``'s candidate."""
        target = build.candidate.target
        if slot.gpu != is_gpu_target(target):
            return False
        return not self.route_by_target or host_resource(target) in slot.serves

    def stream(self, builds: Sequence[BuildResult]) -> Iterator[tuple[int, RunResult]]:
        queue: deque[int] = deque()
        for index, build in enumerate(builds):
            if build.ok:
                queue.append(index)
            else:
                yield index, RunResult.from_build(build)
        if queue:
            if any(is_gpu_target(builds[i].candidate.target) for i in queue):
                self._gpus_wanted = True
            self._join_new_nodes()
        moves: dict[int, int] = {}
        busy: dict[ray.ObjectRef, _Slot] = {}
        try:
            while queue or busy:
                self._assign(queue, builds, busy)
                if not busy:
                    yield from self._wait_for_hosts(queue, builds)
                    continue
                earliest = min(slot.task.deadline for slot in busy.values() if slot.task)
                timeout = max(0.0, earliest - time.monotonic())
                ready, _ = ray.wait(list(busy), num_returns=1, timeout=timeout)
                for ref in ready:
                    slot = busy.pop(ref)
                    yield from self._advance(slot, ref, builds, busy, queue, moves)
                yield from self._expire(busy, builds, queue, moves)
        finally:
            for slot in busy.values():
                slot.task = None
                ray.kill(slot.actor, no_restart=False)
                slot.prepared.clear()

    def _assign(
        self, queue: deque[int], builds: Sequence[BuildResult], busy: dict[ray.ObjectRef, _Slot]
    ) -> None:
        """Give each idle runner the first queued candidate it may measure."""
        for slot in self._slots:
            if not slot.alive or slot.task is not None:
                continue
            index = next((i for i in queue if self._takes(slot, builds[i])), None)
            if index is not None:
                queue.remove(index)
                self._start(slot, index, builds[index], busy)

    def _wait_for_hosts(
        self, queue: deque[int], builds: Sequence[BuildResult]
    ) -> Iterator[tuple[int, RunResult]]:
        """Every runner is idle and none may take a queued candidate: wait up to
        ``host_wait_s`` for a node that may; then record the candidates none took."""

        def homeless() -> list[int]:
            live = [slot for slot in self._slots if slot.alive]
            return [i for i in queue if not any(self._takes(s, builds[i]) for s in live)]

        deadline = time.monotonic() + self.host_wait_s
        waiting = homeless()
        if waiting:
            logger.warning(
                "%d candidates wait for a runner host (%s) for up to %g s",
                len(waiting),
                self._wanted(builds[waiting[0]]),
                self.host_wait_s,
            )
        while waiting and time.monotonic() < deadline:
            time.sleep(HOST_POLL_S)
            self._join_new_nodes()
            waiting = homeless()
        for index in waiting:
            queue.remove(index)
            message = (
                f"no runner host came within {self.host_wait_s:g} s: {self._wanted(builds[index])}"
            )
            yield index, RunResult.failed(builds[index].candidate, ErrorKind.HOST_LOST, message)

    def _wanted(self, build: BuildResult) -> str:
        """What a host must be to measure ``build``'s candidate, and how to start one."""
        target = build.candidate.target
        gpus = " --num-gpus N" if is_gpu_target(target) else ""
        if self.route_by_target:
            return (
                f"no live Ray node has resource {host_resource(target)!r}"
                f"{' and a GPU' if gpus else ''}; start one with "
                f"`tensortune ray-node --address HEAD:PORT --target {target!r}{gpus}`"
            )
        if gpus:
            return (
                "no live Ray node has a GPU; start one with "
                f"`tensortune ray-node --address HEAD:PORT{gpus}`"
            )
        return "every runner node was lost and none joined"

    def _start(
        self, slot: _Slot, index: int, build: BuildResult, busy: dict[ray.ObjectRef, _Slot]
    ) -> None:
        candidate = build.candidate
        config = self.config.to_json()
        if slot.served >= self.candidates_per_actor:
            self._renew(slot)
        slot.served += 1
        if candidate.reference_key in slot.prepared:
            self._submit_measure(slot, index, build, busy)
            return
        ref = slot.actor.prepare.remote(candidate.to_json(), config)
        deadline = time.monotonic() + self.config.reference_timeout_s
        slot.task = _Task(index, "prepare", deadline)
        busy[ref] = slot

    def _submit_measure(
        self, slot: _Slot, index: int, build: BuildResult, busy: dict[ray.ObjectRef, _Slot]
    ) -> None:
        assert build.artifact is not None
        config = self.config.to_json()
        ref = slot.actor.measure.remote(build.header(), build.artifact.library, config)
        slot.task = _Task(index, "measure", time.monotonic() + self.config.timeout_s)
        busy[ref] = slot

    def _advance(
        self,
        slot: _Slot,
        ref: ray.ObjectRef,
        builds: Sequence[BuildResult],
        busy: dict[ray.ObjectRef, _Slot],
        queue: deque[int],
        moves: dict[int, int],
    ) -> Iterator[tuple[int, RunResult]]:
        """Move ``slot`` on after its call ``ref`` finished."""
        task = slot.task
        assert task is not None
        build = builds[task.index]
        candidate = build.candidate
        try:
            value = ray.get(ref)
        except RayTaskError as err:
            slot.task = None
            yield task.index, self._failed(slot, candidate, ErrorKind.INTERNAL, str(err))
            return
        except RayError as err:  # the actor died, or its node
            if task.phase == "revive":
                if isinstance(err, ActorUnavailableError) and time.monotonic() < task.deadline:
                    busy[slot.actor.ping.remote()] = slot  # still restarting: ask again
                    return
                self._lose_host(slot, task.index, queue, moves)
                yield from self._give_up(task.index, builds, moves, _first_line(err))
                return
            step = "computing the reference" if task.phase == "prepare" else "running the candidate"
            message = f"the runner actor died {step}: {_first_line(err)}"
            self._revive(
                slot, task, self._failed(slot, candidate, ErrorKind.CRASHED, message), busy
            )
            return
        slot.task = None
        if task.phase == "prepare":
            slot.prepared.add(candidate.reference_key)
            self._submit_measure(slot, task.index, build, busy)
        elif task.phase == "measure":
            result = RunResult.from_json(value)
            if result.error_kind is ErrorKind.CRASHED:
                self._renew(slot)  # its measurer says the process is unusable
            yield task.index, result
        else:
            assert task.failure is not None
            yield task.index, task.failure

    def _expire(
        self,
        busy: dict[ray.ObjectRef, _Slot],
        builds: Sequence[BuildResult],
        queue: deque[int],
        moves: dict[int, int],
    ) -> Iterator[tuple[int, RunResult]]:
        now = time.monotonic()
        for ref, slot in list(busy.items()):
            task = slot.task
            assert task is not None
            if task.deadline > now or ray.wait([ref], timeout=0)[0]:
                continue
            del busy[ref]
            if task.phase == "revive":
                self._lose_host(slot, task.index, queue, moves)
                yield from self._give_up(task.index, builds, moves, "its actor did not come back")
                continue
            seconds = (
                self.config.reference_timeout_s
                if task.phase == "prepare"
                else self.config.timeout_s
            )
            step = "computing the reference" if task.phase == "prepare" else "running the candidate"
            message = f"{step} took longer than {seconds:g} s; the runner actor was restarted"
            failure = self._failed(slot, builds[task.index].candidate, ErrorKind.TIMEOUT, message)
            ray.kill(slot.actor, no_restart=False)
            self._revive(slot, task, failure, busy)

    def _revive(
        self, slot: _Slot, task: _Task, failure: RunResult, busy: dict[ray.ObjectRef, _Slot]
    ) -> None:
        """Ping the restarting actor; ``failure`` is recorded if it answers in time."""
        slot.prepared.clear()
        deadline = time.monotonic() + self.revive_timeout_s
        slot.task = _Task(task.index, "revive", deadline, failure)
        busy[slot.actor.ping.remote()] = slot

    def _lose_host(self, slot: _Slot, index: int, queue: deque[int], moves: dict[int, int]) -> None:
        """The slot's node is gone: drop its actor and queue its candidate again."""
        slot.alive = False
        slot.task = None
        ray.kill(slot.actor, no_restart=True)
        moves[index] = moves.get(index, 0) + 1
        if moves[index] <= self.node_retries:
            queue.appendleft(index)

    def _give_up(
        self, index: int, builds: Sequence[BuildResult], moves: dict[int, int], why: str
    ) -> Iterator[tuple[int, RunResult]]:
        """A record for a candidate whose host was lost too many times."""
        if moves[index] > self.node_retries:
            message = (
                f"lost {moves[index]} runner hosts while measuring this candidate "
                f"(the last: {why}); the retry limit is {self.node_retries}"
            )
            yield index, RunResult.failed(builds[index].candidate, ErrorKind.HOST_LOST, message)

    @staticmethod
    def _failed(slot: _Slot, candidate: Candidate, kind: ErrorKind, message: str) -> RunResult:
        return RunResult.failed(candidate, kind, message, slot.host)

    def close(self) -> None:
        for slot in self._slots:
            if slot.alive:
                ray.kill(slot.actor, no_restart=True)
                slot.alive = False


def _new_actor(
    node_id: str,
    host: str,
    measurer: str,
    *,
    num_gpus: int = 0,
    resources: Mapping[str, float] | None = None,
) -> Any:
    """A runner actor pinned to ``node_id``, restarted there when it dies, holding
    ``num_gpus`` GPUs (Ray sets its CUDA_VISIBLE_DEVICES) and ``resources``."""
    return _RunnerActor.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        num_cpus=0,
        num_gpus=num_gpus,
        resources=dict(resources or {}),
        max_restarts=-1,
        max_task_retries=0,
        runtime_env={"env_vars": RUNNER_ENV},
    ).remote(host, measurer)


def _undo_ray_thread_limit() -> None:
    """Ray sets OMP_NUM_THREADS=1 in an actor that holds no CPU, as the runner does;
    kernels must run with the threads the target asks for (every core when it names
    none), as they will in production. So before OpenMP is loaded, drop the limit
    Ray added. A host that set OMP_NUM_THREADS=1 itself looks the same and loses it
    too; a thread count belongs in the target (``-num-cores=N``) anyway."""
    assigned = ray.get_runtime_context().get_assigned_resources().get("CPU")
    if assigned is None and os.environ.get("OMP_NUM_THREADS") == "1":
        del os.environ["OMP_NUM_THREADS"]


def _node_ids() -> frozenset[str]:
    return frozenset(node["NodeID"] for node in alive_nodes())


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
