"""``GeneratedSpace``: a space generated from the computation itself (MetaSchedule's
PostOrderApply with schedule rules and postprocessors), for any workload, with or
without a template.

The rules (``tuner.space.rules``) are applied to every block, consumers before
producers, each on every partial schedule so far; a rule with alternatives forks
them. The schedules that come out (at most MAX_DESIGNS) are the design traces;
the root rule last samples the parallel, vector and unroll sizes. A candidate is a
design replayed with its decisions, then postprocessed (``postprocess``), which
turns the sampled sizes into loop kinds with traced primitives: a candidate's
trace is its design's instructions followed by the postprocessing's, and replays
alone, without the space.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping
from functools import partial
from typing import Any

from compiler.ir.analysis import find_block_realize
from compiler.ir.function import PrimFunc
from compiler.ir.layout_free import is_conversion
from compiler.schedule import BlockRV, Schedule, ScheduleError, Trace
from compiler.schedule import primitives as P
from compiler.schedule.primitives.common import const_int
from compiler.schedule.primitives.compute_location import (
    compute_at_candidates,
    compute_at_iterations,
)
from compiler.schedule.primitives.dataflow import leaf_realizes
from compiler.schedule.tile_transform import is_tile_transform, schedule_tile_transform
from compiler.target.parse import Target, parse_target
from compiler.workload.key import workload_key
from tuner.space.base import (
    Decisions,
    Domain,
    Space,
    SpaceError,
    TraceCandidate,
    decision_value,
    parse_trace,
)
from tuner.space.designs import compute_location_domain, sampling_domain, skeleton
from tuner.space.postprocess import postprocess
from tuner.space.prefix_replay import PrefixReplay
from tuner.space.rules import block_rules, root_rule
from tuner.space.rules.analysis import attempt, has_block, is_expensive
from tuner.space.rules.parallel_vectorize_unroll import ROLES
from tuner.space.virtual_thread_tiles import capped, virtual_thread_caps

# The most design traces a space keeps; forks beyond it are dropped, the first
# (least transformed) kept.
MAX_DESIGNS = 8
# The root block's annotation that each sampled size's role names.
_ANNOTATION_OF_ROLE = {role: key for key, role in ROLES.items()}
INLINE = -2
ROOT = -1
# A compute location may make a block run this many times as often as at the root
# (a convolution's padding computed per output tile overlaps its neighbours a little);
# beyond it the location only repeats the same work, which measuring would show at
# great cost (a softmax row's maximum recomputed for every element of the row).
MAX_RECOMPUTATION = 2
# Spaces made in this process, newest last, that ``for_workload`` hands out again: a
# blocked convolution's space takes seconds to make, and transfer asks for the spaces
# of a model's other tasks (which that model's tuning has made already) every round.
SHARED_SPACES = 64
_shared: OrderedDict[tuple[str, str, int], GeneratedSpace] = OrderedDict()
_shared_lock = threading.Lock()


class GeneratedSpace(Space):
    """The schedules the rules generate for ``func`` on ``target``; ``seed`` draws the
    design traces' own decisions."""

    def __init__(self, func: PrimFunc, *, target: str | Target = "llvm", seed: int = 0) -> None:
        if not isinstance(func, PrimFunc):
            raise SpaceError(f"a generated space takes a PrimFunc, not {type(func).__name__}")
        self.func = func
        self.target = parse_target(target)
        self.seed = seed
        self._designs = tuple(sch.trace for sch in generate_designs(func, self.target, seed))
        self._sampled = tuple(tuple(sorted(d.decisions)) for d in self._designs)
        self._domains = tuple(self._design_domains(d) for d in range(len(self._designs)))
        self._skeletons = tuple(skeleton(d) for d in self._designs)
        self._replay = PrefixReplay(func, self._designs)
        _share(self)

    @property
    def name(self) -> str:
        return f"generated space ({len(self._designs)} designs)"

    def _design_domains(self, design: int) -> tuple[Domain, ...]:
        """The domain of each sampling instruction of ``design``. A compute location's
        domain is read on the design replayed up to it: one replay walks the design,
        and the work at each location is weighed there (``_work_at``). Tiles that
        become virtual threads are capped (``virtual_thread_tiles``)."""
        trace = self._designs[design]
        sch = Schedule(self.func)
        bindings: dict[int, Any] = {}
        replayed = 0
        domains = []
        vthread_caps = virtual_thread_caps(trace)
        for index in self._sampled[design]:
            inst = trace.instructions[index]
            role = _role(trace, index)
            if inst.kind != "sample_compute_location":
                domain = sampling_domain(self.func, trace, index, role)
                if index in vthread_caps:
                    domain = capped(domain, *vthread_caps[index])
                domains.append(domain)
                continue
            trace.replay_range(sch, replayed, index, bindings=bindings)
            replayed = index
            block = bindings[id(inst.inputs["block"])]
            domain = compute_location_domain(sch, block, role)
            expensive = self._is_expensive(inst.inputs["block"].name)
            places = [ROOT, *(v for v in domain.values if v >= 0)]
            work = _work_at(sch, block, places)
            kept = tuple(
                v
                for v in domain.values
                if (v != INLINE or not expensive)
                and (v < 0 or work[v] <= MAX_RECOMPUTATION * work[ROOT])
            )
            domains.append(Domain(domain.kind, kept, role=role))
        return tuple(domains)

    def _is_expensive(self, block_name: str) -> bool:
        """An original block that calls a costly intrinsic: never inlined, since each
        consumer would evaluate it again."""
        realize = find_block_realize(self.func.body, block_name)
        return realize is not None and is_expensive(realize.block)

    def design_traces(self) -> tuple[Trace, ...]:
        return self._designs

    def decision_domains(self, design: int) -> tuple[Domain, ...]:
        if not isinstance(design, int) or not 0 <= design < len(self._designs):
            raise SpaceError(
                f"design {design!r} is not one of the {len(self._designs)} designs of {self.name}"
            )
        return self._domains[design]

    def _schedule(self, decisions: Decisions) -> Schedule:
        sampled = self._sampled[decisions.design]
        if len(decisions.values) != len(sampled):
            raise SpaceError(
                f"decisions {decisions} do not fit the {len(sampled)} sampling instructions "
                f"of design {decisions.design} of {self.name}"
            )
        done = postprocess(self._replay.replay(decisions.design, decisions.values))
        least = self._least_point(decisions, done.least_sizes)
        if least == decisions:
            return done.schedule
        return postprocess(self._replay.replay(least.design, least.values)).schedule

    def _point_of(self, decisions: Decisions, sch: Schedule) -> Decisions:
        """The point ``sch``'s trace holds: ``decisions`` with its sizes at their least
        (``_least_point``)."""
        return self._trace_point(decisions.design, sch.trace)

    def _trace_point(self, design: int, trace: Trace) -> Decisions:
        """The point of ``design`` whose decisions ``trace`` (of that design) holds."""
        return Decisions(
            design,
            tuple(decision_value(trace.instructions[i].decision) for i in self._sampled[design]),
        )

    def _least_point(self, decisions: Decisions, least_sizes: Mapping[str, int]) -> Decisions:
        """``decisions`` with each sampled parallel, vector and unroll size lowered to
        the smallest one of its domain that realises the same loops (``postprocess``):
        the points that make one program make one trace, which a search measures once."""
        values = list(decisions.values)
        for k, domain in enumerate(self._domains[decisions.design]):
            least = least_sizes.get(_ANNOTATION_OF_ROLE.get(domain.role, ""))
            if least is None:
                continue
            sampled = domain.candidates[values[k]]
            values[k] = min(
                (v for v in domain.values if least <= domain.candidates[v] <= sampled),
                key=lambda v: domain.candidates[v],
            )
        return Decisions(decisions.design, tuple(values))

    def _read_trace(self, trace: Trace | str) -> TraceCandidate | None:
        parsed = parse_trace(trace)
        if parsed is None:
            return None
        for design, design_trace in enumerate(self._designs):
            prefix = Trace(parsed.instructions[: len(design_trace)])
            if skeleton(prefix) != self._skeletons[design]:
                continue
            try:
                made = self.candidate(self._trace_point(design, parsed))
            except ScheduleError:
                return None
            if made.trace_hash == parsed.structural_hash:
                return made
        return None

    def for_workload(self, func: PrimFunc) -> GeneratedSpace | None:
        with _shared_lock:
            made = _shared.get((workload_key(func), str(self.target), self.seed))
        if made is not None:
            return made
        try:
            return GeneratedSpace(func, target=self.target, seed=self.seed)
        except SpaceError:
            return None

    def __repr__(self) -> str:
        return f"GeneratedSpace({self.name!r})"


def _role(trace: Trace, index: int) -> str:
    """The role of a categorical sampling instruction: what the annotation that takes
    its value does (parallel, vectorize, unroll); empty for any other instruction."""
    inst = trace.instructions[index]
    if inst.kind != "sample_categorical":
        return ""
    return next(
        (
            ROLES.get(str(other.inputs.get("ann_key")), "")
            for other in trace.instructions[index + 1 :]
            if other.kind == "annotate" and other.inputs.get("ann_val") is inst.outputs[0]
        ),
        "",
    )


def _work_at(sch: Schedule, block: BlockRV, locations: list[int]) -> dict[int, int]:
    """How many times ``block`` runs when computed at each of ``locations`` (ROOT, or
    the k-th loop ``sample_compute_location`` offers): the product of the loop extents
    around it. A loop its consumer's region does not depend on (a softmax row's maximum
    put inside the loop over the row) repeats the whole block that many times. The
    designs compute a block at its sampled location right after sampling it
    (``rules.random_compute_location``), so ``sch``, replayed up to that sample, is
    what compute_at moves the block in."""
    func = sch.mod[block.func_name]
    stmt = sch.get(block)
    loops = compute_at_candidates(func, stmt)
    here = [const_int(loop.extent) for loop in P.loops_above(func, stmt.name)]
    work = {ROOT: math.prod(e if e is not None else 1 for e in here)}
    for location in locations:
        if location != ROOT:
            work[location] = compute_at_iterations(func, stmt, loops[location])
    return work


def _share(space: GeneratedSpace) -> None:
    key = (space.workload_key, str(space.target), space.seed)
    with _shared_lock:
        _shared[key] = space
        _shared.move_to_end(key)
        while len(_shared) > SHARED_SPACES:
            _shared.popitem(last=False)


def generate_designs(func: PrimFunc, target: Target, seed: int = 0) -> list[Schedule]:
    """The design schedules of ``func``: every block rule on every block, consumers
    first, on every schedule so far (at most MAX_DESIGNS), then the root rule. A
    constant weight's conversion runs once, at build time: no rule touches it. A
    Winograd tile transform gets its one structure (``compiler.schedule.tile_transform``)
    and the root rule's parallel loops."""
    rules = block_rules(target)
    schedules = [Schedule(func, seed=seed)]
    blocks = {realize.block.name: realize.block for realize in leaf_realizes(func.body)}
    for name in reversed(P.block_names(func)):
        if name in blocks and is_conversion(blocks[name]):
            continue
        made: list[Schedule] = []
        for sch in schedules:
            if not has_block(sch, name):
                made.append(sch)
                continue
            block = sch.get_block(name)
            if name in blocks and is_tile_transform(blocks[name]):
                made.append(attempt(sch, partial(schedule_tile_transform, block=block)) or sch)
                continue
            forks = [sch]
            for rule in rules:
                forks = [
                    out
                    for fork in forks
                    for out in (rule.apply(fork, block) if has_block(fork, name) else [fork])
                ]
            made += forks
        schedules = made[:MAX_DESIGNS]
    final = root_rule(target)
    return [out for sch in schedules for out in final.apply(sch, sch.get_block("root"))]
