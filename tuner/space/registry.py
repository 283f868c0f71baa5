"""Templates by name: ``@template("matmul.x86", blocks=("T_matmul",))``.

A template is a schedule function ``f(cfg, sch)`` of a config (see
``tuner.space.config``). It names the blocks it schedules, which is how a
workload finds the templates that fit it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compiler.ir.analysis import find_block_realize
from compiler.ir.function import PrimFunc
from compiler.schedule import Schedule
from tuner.space.base import SpaceError

TemplateFunc = Callable[[Any, Schedule], None]


@dataclass(frozen=True)
class Template:
    name: str
    func: TemplateFunc
    blocks: tuple[str, ...]
    target_kind: str = "llvm"

    def fits(self, workload: PrimFunc) -> bool:
        """Whether ``workload`` has every block this template schedules."""
        return all(find_block_realize(workload.body, b) is not None for b in self.blocks)


_TEMPLATES: dict[str, Template] = {}


def template(
    name: str, *, blocks: tuple[str, ...], target_kind: str = "llvm"
) -> Callable[[TemplateFunc], TemplateFunc]:
    """Register the decorated function as template ``name`` for workloads that have
    ``blocks``, on targets of ``target_kind`` (``"llvm"`` or ``"cuda"``)."""

    def register(func: TemplateFunc) -> TemplateFunc:
        if name in _TEMPLATES:
            raise SpaceError(f"template {name!r} is registered twice")
        _TEMPLATES[name] = Template(name, func, blocks, target_kind)
        return func

    return register


def get_template(name: str) -> Template:
    if name not in _TEMPLATES:
        raise SpaceError(f"unknown template {name!r}; registered: {', '.join(template_names())}")
    return _TEMPLATES[name]


def template_names() -> list[str]:
    return sorted(_TEMPLATES)


def templates_for(workload: PrimFunc, target_kind: str = "llvm") -> list[Template]:
    """The registered templates for ``target_kind`` that fit ``workload``, by name."""
    return [
        _TEMPLATES[n]
        for n in template_names()
        if _TEMPLATES[n].target_kind == target_kind and _TEMPLATES[n].fits(workload)
    ]
