"""Which space a run searches: ``auto``, ``template``, ``generated`` or a schedule
function.

``auto`` is the registered knob template that fits the workload, else the space
generated from schedule rules; ``template`` is a template, the one ``template``
names or else the one that fits; ``generated`` is the generated space, also where a
template fits (to compare the two); a schedule
function ``f(sch)`` that draws its choices with sampling instructions is a space
of its own, given as the function or, on the command line, as
``"module:function"`` (the convention of ``workers.base.load_hook``). A
function's module is imported in this process only: the workers replay the traces
its design yields and never import it. (The command line looks for the module in
the current folder too, as ``python -m`` does.)
"""

from __future__ import annotations

import importlib

from compiler.ir.function import PrimFunc
from compiler.target.parse import Target, target_kind
from tuner import space as spaces
from tuner.space import Space, SpaceError
from tuner.space.schedule_fn import ScheduleFn

CHOICES = ("auto", "template", "generated")
EXAMPLE = "my_schedules:tile_matmul"


def choose_space(
    choice: ScheduleFn | str,
    func: PrimFunc,
    *,
    target: str | Target = "llvm",
    template: str | None = None,
    seed: int = 0,
) -> Space:
    """The space ``choice`` names for ``func``: ``"auto"``, ``"template"``,
    ``"generated"``, a ``"module:function"`` name or a schedule function itself (``seed`` draws the
    decisions of its design trace). Raises SpaceError naming the choice and the fix."""
    if choice == "auto":
        return spaces.space_for(func, target=target, template=template)
    if choice == "template":
        if template is None and not spaces.templates_for(func, target_kind(target)):
            raise SpaceError(
                "no registered template fits this workload (the templates are "
                f"{', '.join(spaces.template_names())}); --space auto or generated searches "
                "the space generated from schedule rules"
            )
        return spaces.space_for(func, target=target, template=template)
    if template is not None:
        raise SpaceError(
            f"template {template!r} goes with the space 'auto' or 'template', not with "
            f"{choice!r}; leave the template out"
        )
    if choice == "generated":
        return spaces.create("generated", func=func, target=target, seed=seed)
    schedule_fn = load_schedule_fn(choice) if isinstance(choice, str) else choice
    return spaces.create(
        "schedule_fn", func=func, schedule_fn=schedule_fn, target=target, seed=seed
    )


def load_schedule_fn(name: str) -> ScheduleFn:
    """The function a ``"module:function"`` name names, its module imported from
    ``sys.path``; raises SpaceError for any other name."""
    module_name, colon, attribute = name.partition(":")
    if not colon or not module_name or not attribute:
        raise SpaceError(
            f"space {name!r} is neither {' nor '.join(CHOICES)} nor a schedule function "
            f'named "module:function" (e.g. {EXAMPLE!r})'
        )
    try:
        module = importlib.import_module(module_name)
    except (ImportError, SyntaxError) as err:
        raise SpaceError(
            f"cannot import {module_name!r} (from space {name!r}): {err}; run from its folder "
            "or put that folder on PYTHONPATH"
        ) from None
    found = getattr(module, attribute, None)
    if found is None:
        raise SpaceError(f"module {module_name!r} has no {attribute!r} (from space {name!r})")
    if not callable(found):
        raise SpaceError(
            f"{name!r} is {type(found).__name__!r}, not a schedule function f(sch); name a function"
        )
    return found
