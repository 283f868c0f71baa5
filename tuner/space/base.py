"""The space extension point: a workload's schedules as traces whose sampling
instructions hold the decisions.

A space turns a workload into one or more *design traces*. Each sampling
instruction of a design (``sample_perfect_tile``, ``sample_categorical``,
``sample_compute_location``) has a finite domain of decisions; filling in every
decision and replaying gives a *candidate*: the workload and a trace with all its
decisions, named by the trace's structural hash. Search strategies read and
write decisions only, so a knob template, a user's schedule function and a
generated sketch are searched the same way (TVM MetaSchedule's design space).

Numbering every candidate is an optional capability (``EnumerableSpace``): grid
search needs it, nothing else does, and a space of generated sketches has none.
"""

from __future__ import annotations

import abc
import gc
import hashlib
import math
import random
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from compiler.ir.function import PrimFunc
from compiler.lower.gpu_kernels import lower_gpu
from compiler.schedule import Schedule, ScheduleError, Trace
from compiler.target.cuda import CudaTarget
from compiler.target.parse import Target
from compiler.tuned.replay import REPLAYS, ScheduledProgram
from compiler.workload.flops import flop_count
from compiler.workload.key import workload_key

# Draws ``sample`` makes before it gives up on finding a legal candidate. A generated
# space's sampled vector and parallel sizes fit only some tilings (a full sum has no
# spatial loop to vectorize), so as few as one draw in ten may be legal there.
SAMPLE_ATTEMPTS = 256
# Candidates (or the ScheduleError) of this many points are kept per space, so that
# a search that proposes and a model that featurizes one point schedule it once.
CANDIDATE_CACHE_SIZE = 8192


class SpaceError(ValueError):
    """A space or template defined wrongly (a bad knob, an unknown template or kind),
    as opposed to decisions that cannot be applied, which is a ScheduleError."""


@dataclass(frozen=True)
class Domain:
    """The decisions one sampling instruction of a design trace may take: ``values``
    are decisions as the trace holds them (tiles as tuples); ``candidates`` are what
    a ``sample_categorical`` decision (an index) stands for; ``role`` says what the
    decision controls where a space knows it (``"parallel"``, ``"vectorize"``,
    ``"unroll"``), so a search can weigh its moves by role; "" where it does not."""

    kind: str
    values: tuple[Any, ...]
    candidates: tuple[int, ...] = ()
    role: str = ""
    _positions: dict[Any, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.values:
            raise SpaceError(f"a {self.kind} domain has no decisions; give it at least one")
        object.__setattr__(self, "_positions", {v: k for k, v in enumerate(self.values)})

    def __len__(self) -> int:
        return len(self.values)

    def position(self, value: Any) -> int | None:
        """Where ``value`` is among the decisions, None when it is not one."""
        return self._positions.get(value)


def positions(domains: Sequence[Domain], values: Sequence[Any]) -> tuple[int, ...]:
    """Where each decision is in its domain: a point as the row of ints that a cost
    model's annealing walks; raises SpaceError for a decision outside its domain."""
    found = []
    for domain, value in zip(domains, values, strict=True):
        position = domain.position(value)
        if position is None:
            raise SpaceError(f"decision {value!r} is not in its {domain.kind} domain")
        found.append(position)
    return tuple(found)


@dataclass(frozen=True)
class Decisions:
    """A point of a space: the design trace it fills in and one decision per sampling
    instruction of it, in trace order (hashable: tiles are tuples)."""

    design: int
    values: tuple[Any, ...]


@dataclass(frozen=True)
class TraceCandidate:
    """A workload and a trace with every decision filled in. Two candidates are equal
    when their traces are structurally equal (``trace_hash``), whatever made them."""

    workload_key: str
    trace_hash: str
    trace: Trace = field(compare=False, repr=False)
    decisions: Decisions = field(compare=False)

    @cached_property
    def trace_json(self) -> str:
        return self.trace.to_json_string()


def decision_value(decision: Any) -> Any:
    """A trace's decision as a hashable value: a tile's list becomes a tuple."""
    return tuple(decision) if isinstance(decision, list) else decision


def trace_decision(value: Any) -> Any:
    """A decision value as a trace holds it: a tile's tuple becomes a list."""
    return list(value) if isinstance(value, tuple) else value


def parse_trace(trace: Trace | str) -> Trace | None:
    """A trace or its JSON, None for malformed JSON."""
    if isinstance(trace, Trace):
        return trace
    try:
        return Trace.from_json(trace)
    except ScheduleError:
        return None


class Space(abc.ABC):
    """The schedules of one workload (``func``) on ``target``, as decisions of its
    design traces. Implementations give the designs, each one's domains, how
    decisions become a candidate, and how a stored trace reads back."""

    func: PrimFunc
    target: Target

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """What made the space (``template matmul.x86``), for reports."""

    @abc.abstractmethod
    def design_traces(self) -> Sequence[Trace]:
        """The design traces, whose sampling instructions the decisions fill in."""

    @property
    def design_count(self) -> int:
        """How many design traces there are (known without making them)."""
        return len(self.design_traces())

    @abc.abstractmethod
    def decision_domains(self, design: int) -> tuple[Domain, ...]:
        """The domain of each sampling instruction of design ``design``, in order."""

    @abc.abstractmethod
    def _schedule(self, decisions: Decisions) -> Schedule:
        """The workload scheduled with these decisions; raises ScheduleError when they
        are illegal on it."""

    @abc.abstractmethod
    def _read_trace(self, trace: Trace | str) -> TraceCandidate | None:
        """The candidate a stored trace (or its JSON) records, None for a malformed
        trace or one this space did not make."""

    @abc.abstractmethod
    def for_workload(self, func: PrimFunc) -> Space | None:
        """The same kind of space on another workload (a matmul of another shape),
        None when it does not fit that workload; what transfer learns across."""

    # shared ------------------------------------------------------------------------

    def candidate(self, decisions: Decisions) -> TraceCandidate:
        """The candidate these decisions make; raises ScheduleError (remembered too)
        when they are illegal on this workload. Its program is kept for the process,
        so features and builds here do not replay it again."""
        made = self._candidates.get(decisions)
        if made is None:
            with collection_paused():
                made = self._made(decisions)
            self._keep(decisions, made)
            if isinstance(made, TraceCandidate) and made.decisions != decisions:
                self._keep(made.decisions, made)
        if isinstance(made, ScheduleError):
            # Raised afresh each time: a kept traceback would grow with every raise and
            # hold the frames of every caller it passed through.
            raise made.with_traceback(None)
        return made

    def _keep(self, decisions: Decisions, made: TraceCandidate | ScheduleError) -> None:
        if len(self._candidates) >= CANDIDATE_CACHE_SIZE:
            self._candidates.popitem(last=False)
        self._candidates[decisions] = made

    def _made(self, decisions: Decisions) -> TraceCandidate | ScheduleError:
        try:
            sch = self._schedule(decisions)
            _verify_for_target(sch, self.target)
            trace = sch.trace
            digest = trace.structural_hash
            REPLAYS.remember(self.workload_key, digest, sch.mod["main"])
            return TraceCandidate(self.workload_key, digest, trace, self._point_of(decisions, sch))
        except ScheduleError as err:
            return err.with_traceback(None)

    def _point_of(self, decisions: Decisions, sch: Schedule) -> Decisions:
        """The point whose candidate ``sch`` is (``_schedule(decisions)`` made it):
        ``decisions`` itself, unless the space makes one schedule for several points
        and hands out the trace of one of them (``GeneratedSpace``)."""
        return decisions

    @cached_property
    def _candidates(self) -> OrderedDict[Decisions, TraceCandidate | ScheduleError]:
        return OrderedDict()

    def candidate_from_trace(self, trace: Trace | str) -> TraceCandidate | None:
        """The candidate a stored trace (or its JSON) records, None for a malformed
        trace or one this space did not make. Stored JSON is read once per space: a
        model's tuning hands a task's records, and those of similar workloads, to a
        new search every round, and reading a blocked convolution's trace (parse,
        design match, structural hash) takes milliseconds."""
        if not isinstance(trace, str):
            return self._read_trace(trace)
        text_key = hashlib.blake2b(trace.encode(), digest_size=16).digest()
        if text_key in self._read_traces:
            self._read_traces.move_to_end(text_key)
            return self._read_traces[text_key]
        made = self._read_trace(trace)
        if len(self._read_traces) >= CANDIDATE_CACHE_SIZE:
            self._read_traces.popitem(last=False)
        self._read_traces[text_key] = made
        return made

    @cached_property
    def _read_traces(self) -> OrderedDict[bytes, TraceCandidate | None]:
        return OrderedDict()

    @cached_property
    def workload_key(self) -> str:
        return workload_key(self.func)

    @cached_property
    def flop_count(self) -> int:
        return flop_count(self.func)

    def random_decisions(self, rng: random.Random, design: int | None = None) -> Decisions:
        """One decision of each domain of ``design`` (None: a design drawn too), uniformly
        at random."""
        if design is None:
            design = rng.randrange(self.design_count)
        domains = self.decision_domains(design)
        return Decisions(design, tuple(rng.choice(d.values) for d in domains))

    def sample(self, rng: random.Random) -> TraceCandidate:
        """A legal candidate with every decision drawn at random; raises ScheduleError
        when SAMPLE_ATTEMPTS draws were all illegal."""
        error: ScheduleError | None = None
        for _ in range(SAMPLE_ATTEMPTS):
            try:
                return self.candidate(self.random_decisions(rng))
            except ScheduleError as err:
                error = err
        raise ScheduleError(
            f"{SAMPLE_ATTEMPTS} random draws of {self.name} were all illegal; the last: {error}"
        )

    def mutated(self, decisions: Decisions, rng: random.Random) -> Decisions:
        """``decisions`` with one decision (among those with a choice) redrawn to
        another value; the same when no decision has a choice."""
        domains = self.decision_domains(decisions.design)
        movable = [k for k, d in enumerate(domains) if len(d) > 1]
        if not movable:
            return decisions
        k = rng.choice(movable)
        others = [v for v in domains[k].values if v != decisions.values[k]]
        values = list(decisions.values)
        values[k] = rng.choice(others)
        return Decisions(decisions.design, tuple(values))

    def mutate(self, candidate: TraceCandidate, rng: random.Random) -> TraceCandidate:
        """A neighbour of ``candidate``: one decision changed, replayed; raises
        ScheduleError when the change is illegal."""
        return self.candidate(self.mutated(candidate.decisions, rng))

    def neighbours(self, decisions: Decisions, kind: str | None = None) -> Iterator[Decisions]:
        """Every point that differs from ``decisions`` in exactly one decision (of a
        domain of ``kind``, such as ``"sample_compute_location"``; None: any)."""
        for k, domain in enumerate(self.decision_domains(decisions.design)):
            if kind is not None and domain.kind != kind:
                continue
            for value in domain.values:
                if value != decisions.values[k]:
                    values = (*decisions.values[:k], value, *decisions.values[k + 1 :])
                    yield Decisions(decisions.design, values)

    def shares_points_with(self, other: Space) -> bool:
        """Whether ``other``'s decisions are points of this space that mean the same:
        the same kind of space with the same designs and domains. A sibling workload
        (one operator under another elementwise epilogue: a convolution with and
        without a residual add) has such a space, so its measured points are worth
        trying here as they are."""
        if type(other) is not type(self) or other.design_count != self.design_count:
            return False
        return all(
            other.decision_domains(design) == self.decision_domains(design)
            for design in range(self.design_count)
        )

    def program(self, candidate: TraceCandidate) -> ScheduledProgram:
        """The candidate's scheduled (and, on demand, lowered) program, replayed at
        most once per process."""
        return REPLAYS.replayed(
            self.func, candidate.trace, key=candidate.workload_key, digest=candidate.trace_hash
        )

    def describe(self, candidate: TraceCandidate) -> dict[str, Any]:
        """The candidate's decisions by sampling instruction, for people and logs."""
        design = self.design_traces()[candidate.decisions.design]
        sampled = sorted(design.decisions)
        return {
            f"{design.instructions[i].kind}#{i}": v
            for i, v in zip(sampled, candidate.decisions.values, strict=True)
        }


class EnumerableSpace(Space):
    """A space whose points can be numbered: design by design, the first decision
    varying fastest. Grid search needs this; other strategies do not."""

    @property
    def size(self) -> int:
        return sum(self._design_size(d) for d in range(self.design_count))

    def decisions_at(self, index: int) -> Decisions:
        """The point numbered ``index`` (0 <= index < size)."""
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < self.size:
            raise IndexError(f"point {index!r} is outside the space of {self.size}")
        design = 0
        while index >= self._design_size(design):
            index -= self._design_size(design)
            design += 1
        values = []
        for domain in self.decision_domains(design):
            index, position = divmod(index, len(domain))
            values.append(domain.values[position])
        return Decisions(design, tuple(values))

    def enumerate(self) -> Iterator[Decisions]:
        """Every point in index order."""
        return (self.decisions_at(k) for k in range(self.size))

    def _design_size(self, design: int) -> int:
        return math.prod(len(d) for d in self.decision_domains(design))


def _verify_for_target(sch: Schedule, target: Target) -> None:
    """Raise ScheduleError for a GPU program the target cannot run (too many threads or
    too much shared memory per block, an illegal binding), as MetaSchedule's
    VerifyGPUCode does: refused here, it costs no trial of the budget."""
    if isinstance(target, CudaTarget):
        for name, func in sch.mod.items():
            lower_gpu(func, name, target.capabilities)


@contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a candidate replays. A replay
    allocates IR nodes by the ten thousand, which set off collections that walk
    every live object (a search keeps hundreds of thousands: programs, prefixes,
    candidates), for nodes that form no cycles: 20 % of a conv2d candidate's replay.
    The collector runs again as soon as anything else allocates."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
