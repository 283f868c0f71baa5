"""``TemplateSpace``: the configs of a knob template on one workload (AutoTVM's style)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from compiler.codegen.target import LLVMTarget
from compiler.flops import flop_count
from compiler.ir.function import PrimFunc
from compiler.schedule import Schedule, ScheduleError, Trace
from tuner.space.base import Config, Space, SpaceError
from tuner.space.config import ConfigEntity, KnobCollector, KnobsDefined, categorical_candidates
from tuner.space.knobs import Knob
from tuner.space.registry import Template, get_template, template_names, templates_for

# Traces (or the ScheduleError) of this many configs are kept, so that a search that
# proposes, a model that featurizes and a loop that builds one config apply it once.
TRACE_CACHE_SIZE = 8192


class TemplateSpace(Space):
    """Every config of ``template`` on ``func``, for ``target``'s capabilities.

    ``template`` is a registered name, a Template, or None for the one registered
    template that fits ``func``.
    """

    def __init__(
        self,
        func: PrimFunc,
        template: str | Template | None = None,
        *,
        target: str | LLVMTarget = "llvm",
    ) -> None:
        self.func = func
        self.template = _resolve(func, template)
        self.target = LLVMTarget.parse(target)
        self.knobs: tuple[Knob, ...] = self._collect()
        self._traces: dict[int, Trace | ScheduleError] = {}

    def _collect(self) -> tuple[Knob, ...]:
        cfg = KnobCollector(Schedule(self.func), self.target)
        try:
            self.template.func(cfg, cfg.sch)
        except KnobsDefined:
            pass
        if not cfg.knobs:
            raise SpaceError(f"template {self.template.name!r} defines no knobs")
        return tuple(cfg.knobs)

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(len(k) for k in self.knobs)

    @cached_property
    def flop_count(self) -> int:
        return flop_count(self.func)

    def schedule(self, config: Config) -> Schedule:
        sch = Schedule(self.func)
        cfg = ConfigEntity(sch, self.target, self.knobs, config.choices)
        self.template.func(cfg, sch)
        return sch

    def trace(self, config: Config) -> Trace:
        """The config's trace, remembered for the next ask; raises ScheduleError (also
        remembered) when the config is illegal."""
        known = self._traces.get(config.index)
        if known is None:
            try:
                known = self.schedule(config).trace
            except ScheduleError as err:
                known = err
            if len(self._traces) >= TRACE_CACHE_SIZE:
                self._traces.pop(next(iter(self._traces)))
            self._traces[config.index] = known
        if isinstance(known, ScheduleError):
            raise known
        return known.copy()

    def config_from_trace(self, trace: Trace) -> Config | None:
        sampled = [trace.instructions[i] for i in sorted(trace.decisions)]
        if len(sampled) != len(self.knobs):
            return None
        choices = []
        for knob, inst in zip(self.knobs, sampled, strict=True):
            choice = _choice_of(knob, inst.kind, inst.inputs, inst.decision)
            if choice is None:
                return None
            choices.append(choice)
        return self.config_of(choices)

    def describe(self, config: Config) -> dict[str, Any]:
        return {k.name: k.entities[c] for k, c in zip(self.knobs, config.choices, strict=True)}

    def __repr__(self) -> str:
        return f"TemplateSpace({self.template.name!r}, {len(self.knobs)} knobs, {self.size})"


def _resolve(func: PrimFunc, template: str | Template | None) -> Template:
    if isinstance(template, Template):
        return template
    if isinstance(template, str):
        return get_template(template)
    fitting = templates_for(func)
    if len(fitting) != 1:
        names = [t.name for t in fitting] or template_names()
        raise SpaceError(
            f"{len(fitting)} registered templates fit this workload; name one of {names}"
        )
    return fitting[0]


def _choice_of(knob: Knob, kind: str, inputs: dict[str, Any], decision: Any) -> int | None:
    """The knob choice a sampling instruction recorded, or None when it is not this
    knob's instruction."""
    if kind == "sample_perfect_tile":
        if knob.kind != "split" or not isinstance(decision, list):
            return None
        return knob.position(tuple(decision))
    if kind != "sample_categorical" or inputs.get("candidates") != categorical_candidates(knob):
        return None
    if type(decision) is not int or not 0 <= decision < len(knob):
        return None
    return decision
