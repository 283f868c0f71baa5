"""Spaces of schedules: a workload's design traces and the decisions that fill them in.

``create(kind, **options)`` builds a space: ``"template"`` (a knob template,
AutoTVM's style: ``func=..., template="matmul.x86", target="llvm"``) or
``"schedule_fn"`` (a user's schedule function that draws its choices with
sampling instructions: ``func=..., schedule_fn=f``) or ``"generated"`` (design
traces generated from the computation by schedule rules, for any workload:
``func=...``). ``space_for`` picks the
space of a workload: the registered template that fits it. Registering a
template is ``@template(name, blocks=...)`` on a function ``f(cfg, sch)``; the
templates for matmul, dense, batch matmul, conv2d NCHW and depthwise conv2d
register when this package is imported.
"""

from __future__ import annotations

from typing import Any

from compiler.ir.function import PrimFunc
from compiler.target.parse import Target, target_kind
from tuner.space import templates as _templates  # noqa: F401  (registers the templates)
from tuner.space.base import (
    Decisions,
    Domain,
    EnumerableSpace,
    Space,
    SpaceError,
    TraceCandidate,
)
from tuner.space.config import ConfigEntity
from tuner.space.generated import GeneratedSpace
from tuner.space.knobs import Knob
from tuner.space.registry import Template, get_template, template, template_names, templates_for
from tuner.space.schedule_fn import ScheduleFnSpace
from tuner.space.template import TemplateSpace

KINDS: dict[str, type[Space]] = {
    "template": TemplateSpace,
    "schedule_fn": ScheduleFnSpace,
    "generated": GeneratedSpace,
}


def create(kind: str, **options: Any) -> Space:
    """The space of kind ``kind`` (one of ``KINDS``) built from ``options``."""
    if kind not in KINDS:
        raise SpaceError(f"unknown space kind {kind!r}; the kinds are {sorted(KINDS)}")
    return KINDS[kind](**options)


def space_for(
    func: PrimFunc, *, target: str | Target = "llvm", template: str | None = None
) -> Space:
    """The space to tune ``func`` in: the template named ``template``, else the
    registered template for the target's kind that fits ``func``, else the space
    generated from schedule rules (which every workload has)."""
    if template is None and not templates_for(func, target_kind(target)):
        return create("generated", func=func, target=target)
    return create("template", func=func, template=template, target=target)


__all__ = [
    "KINDS",
    "ConfigEntity",
    "Decisions",
    "Domain",
    "EnumerableSpace",
    "GeneratedSpace",
    "Knob",
    "ScheduleFnSpace",
    "Space",
    "SpaceError",
    "Template",
    "TemplateSpace",
    "TraceCandidate",
    "create",
    "get_template",
    "space_for",
    "template",
    "template_names",
    "templates_for",
]
