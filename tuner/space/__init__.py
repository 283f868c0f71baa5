"""Spaces of schedules: knob templates (AutoTVM's style) over a workload.

``create("template", func=..., template="matmul.x86", target="llvm")`` gives a
space; registering a template is ``@template(name, blocks=...)`` on a function
``f(cfg, sch)``. The templates for matmul, dense, batch matmul, conv2d NCHW and
depthwise conv2d register when this package is imported.
"""

from __future__ import annotations

from typing import Any

from tuner.space import templates as _templates  # noqa: F401  (registers the templates)
from tuner.space.base import Config, Space, SpaceError
from tuner.space.config import ConfigEntity
from tuner.space.knobs import Knob
from tuner.space.registry import Template, get_template, template, template_names, templates_for
from tuner.space.template import TemplateSpace

KINDS = {"template": TemplateSpace}


def create(kind: str, **options: Any) -> Space:
    """The space of kind ``kind`` (one of ``KINDS``) built from ``options``."""
    if kind not in KINDS:
        raise SpaceError(f"unknown space kind {kind!r}; the kinds are {sorted(KINDS)}")
    return KINDS[kind](**options)


__all__ = [
    "Config",
    "ConfigEntity",
    "KINDS",
    "Knob",
    "Space",
    "SpaceError",
    "Template",
    "TemplateSpace",
    "create",
    "get_template",
    "template",
    "template_names",
    "templates_for",
]
