"""``TemplateSpace``: a knob template on one workload (AutoTVM's style), as a space of
decisions.

Each knob is one sampling instruction of the template's trace: an exact split is a
``sample_perfect_tile`` whose decision is the factors, any other knob a
``sample_categorical`` whose decision is the entity's position. The knobs are
defined from the workload alone, so every candidate's trace has the same
sampling instructions: one design, whose domains are the knobs' entities. The
template reads its choices in Python (a reorder, a packing), so a candidate is
made by running the template with the decisions, not by replaying a design.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from compiler.ir.function import PrimFunc
from compiler.schedule import Schedule, ScheduleError, Trace
from compiler.target.parse import Target, parse_target, target_kind
from tuner.space.base import (
    Decisions,
    Domain,
    EnumerableSpace,
    SpaceError,
    TraceCandidate,
    decision_value,
    parse_trace,
)
from tuner.space.config import ConfigEntity, KnobCollector, KnobsDefined, categorical_candidates
from tuner.space.knobs import Knob
from tuner.space.registry import Template, get_template, template_names, templates_for

# Points tried, in index order, for a legal design trace.
DESIGN_ATTEMPTS = 256


class TemplateSpace(EnumerableSpace):
    """Every choice of ``template``'s knobs on ``func``, for ``target``'s capabilities.

    ``template`` is a registered name, a Template, or None for the one registered
    template that fits ``func``.
    """

    def __init__(
        self,
        func: PrimFunc,
        template: str | Template | None = None,
        *,
        target: str | Target = "llvm",
    ) -> None:
        self.func = func
        self.target = parse_target(target)
        self.template = _resolve(func, template, target_kind(self.target))
        collector = self._collect()
        self.knobs: tuple[Knob, ...] = tuple(collector.knobs)
        self._domains = tuple(
            _domain(knob, tile) for knob, tile in zip(self.knobs, collector.tiles, strict=True)
        )

    def _collect(self) -> KnobCollector:
        cfg = KnobCollector(Schedule(self.func), self.target)
        try:
            self.template.func(cfg, cfg.sch)
        except KnobsDefined:
            pass
        if not cfg.knobs:
            raise SpaceError(f"template {self.template.name!r} defines no knobs")
        return cfg

    @property
    def name(self) -> str:
        return f"template {self.template.name}"

    @property
    def design_count(self) -> int:
        return 1

    def design_traces(self) -> tuple[Trace, ...]:
        return (self._design,)

    @cached_property
    def _design(self) -> Trace:
        """The trace of the first legal point: what every candidate's trace looks like."""
        for index in range(min(self.size, DESIGN_ATTEMPTS)):
            try:
                return self.candidate(self.decisions_at(index)).trace
            except ScheduleError:
                continue
        raise SpaceError(
            f"template {self.template.name!r}: none of the first {DESIGN_ATTEMPTS} knob choices "
            "schedules this workload"
        )

    def decision_domains(self, design: int) -> tuple[Domain, ...]:
        if design != 0:
            raise SpaceError(f"a template space has one design, 0; got {design!r}")
        return self._domains

    def _schedule(self, decisions: Decisions) -> Schedule:
        sch = Schedule(self.func)
        cfg = ConfigEntity(sch, self.target, self.knobs, self._choices(decisions))
        self.template.func(cfg, sch)
        return sch

    def _choices(self, decisions: Decisions) -> list[int]:
        """The entity index of each knob that ``decisions`` pick."""
        if decisions.design != 0 or len(decisions.values) != len(self.knobs):
            raise SpaceError(
                f"decisions {decisions} do not fit the {len(self.knobs)} knobs of {self.name}"
            )
        choices = []
        for domain, value in zip(self._domains, decisions.values, strict=True):
            position = domain.position(value)
            if position is None:
                raise SpaceError(f"decision {value!r} is not one of {list(domain.values)}")
            choices.append(position)
        return choices

    def _read_trace(self, trace: Trace | str) -> TraceCandidate | None:
        parsed = parse_trace(trace)
        if parsed is None:
            return None
        sampled = [parsed.instructions[i] for i in sorted(parsed.decisions)]
        if len(sampled) != len(self.knobs):
            return None
        values = []
        for domain, inst in zip(self._domains, sampled, strict=True):
            value = decision_value(inst.decision)
            if inst.kind != domain.kind or domain.position(value) is None:
                return None
            if domain.candidates and inst.inputs.get("candidates") != list(domain.candidates):
                return None
            values.append(value)
        digest = parsed.structural_hash
        return TraceCandidate(self.workload_key, digest, parsed, Decisions(0, tuple(values)))

    def for_workload(self, func: PrimFunc) -> TemplateSpace | None:
        if not self.template.fits(func):
            return None
        return TemplateSpace(func, self.template, target=self.target)

    def decisions_of(self, entities: Mapping[str, Any]) -> Decisions:
        """The point that picks ``entities`` (one per knob, by name): a hand-written
        schedule located in the space."""
        values = []
        for knob, domain in zip(self.knobs, self._domains, strict=True):
            position = knob.position(entities.get(knob.name))
            if position is None:
                raise SpaceError(
                    f"knob {knob.name!r}: {entities.get(knob.name)!r} is not one of its "
                    f"{len(knob)} entities"
                )
            values.append(domain.values[position])
        return Decisions(0, tuple(values))

    def describe(self, candidate: TraceCandidate) -> dict[str, Any]:
        choices = self._choices(candidate.decisions)
        return {k.name: k.entities[c] for k, c in zip(self.knobs, choices, strict=True)}

    def __repr__(self) -> str:
        return f"TemplateSpace({self.template.name!r}, {len(self.knobs)} knobs, {self.size})"


def _domain(knob: Knob, tile: bool) -> Domain:
    """A tile's domain is its factor tuples; any other knob's is the positions of its
    entities, which ``sample_categorical`` records."""
    if tile:
        return Domain("sample_perfect_tile", tuple(knob.entities))
    candidates = tuple(categorical_candidates(knob))
    return Domain("sample_categorical", tuple(range(len(knob))), candidates)


def _resolve(func: PrimFunc, template: str | Template | None, kind: str) -> Template:
    if isinstance(template, str):
        template = get_template(template)
    if isinstance(template, Template):
        if template.target_kind != kind:
            raise SpaceError(
                f"template {template.name!r} schedules for {template.target_kind} targets, "
                f"not {kind}; name a {kind} template or leave the template out"
            )
        return template
    fitting = templates_for(func, kind)
    if len(fitting) != 1:
        names = [t.name for t in fitting] or template_names()
        raise SpaceError(
            f"{len(fitting)} registered templates fit this workload; name one of {names}"
        )
    return fitting[0]
