"""The tasks of a model: its distinct fused workloads, how often each occurs, and
which are worth tuning (a reshape is a view, no workload at all).

Two groups of a model that compute the same thing on values of the same types are one
workload (``compiler.graph.fuse`` names their parameters by position), so a block
repeated through a network is one task of that weight: the model runs it weight
times, and one tuned schedule serves every occurrence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from compiler.graph.algorithms import alternatives
from compiler.graph.executor import optimize
from compiler.graph.ir import Graph
from compiler.graph.ops import OPS, Pattern
from compiler.target.parse import Target, target_kind
from tuner.task import TuneTask

# Groups whose anchor is one of these do arithmetic worth scheduling; the others
# (elementwise chains, reshapes, transposes, pads) move memory, which their default
# schedule already does at the speed of a copy.
WORTH_TUNING = (Pattern.COMPLEX, Pattern.REDUCTION)


@dataclass(frozen=True)
class ModelTask:
    """One workload of the model. ``choice``: for an operator computed by more than
    one algorithm, the workload key of its direct form, shared by all of them (the
    model runs only the fastest); empty otherwise."""

    task: TuneTask
    weight: int
    kind: str
    worth_tuning: bool
    choice: str = ""

    @property
    def is_alternative(self) -> bool:
        """Another algorithm for an operator whose direct form is a task too: the model
        runs one of them, so its FLOPs are counted once, with the direct form."""
        return bool(self.choice) and self.choice != self.task.workload_key

    @property
    def flop_count(self) -> int:
        """The model's FLOPs spent in this task: each occurrence's, times the weight."""
        return self.task.flop_count * self.weight


def extract_tasks(
    graph: Graph,
    target: str | Target = "llvm",
    *,
    conv_block: int | None = None,
) -> list[ModelTask]:
    """The model's distinct workloads in the order they first run (each convolution
    in NCHW[b]c, ``b`` the widest of ``conv_block`` (None: 16) and its halves that its
    channels split into, NCHW with 0 and on a cuda target, as ``GraphModule`` builds
    them then). A group that has other algorithms (a 3x3 convolution's Winograd
    forms) gives a task for each: the build runs whichever is fastest once tuned."""
    if target_kind(target) == "cuda":
        conv_block = 0
    optimized, groups = optimize(graph, conv_block=conv_block)
    found: dict[str, ModelTask] = {}
    for group in groups:
        if group.is_view:
            continue
        options = alternatives(group, optimized)
        choice = ""
        for option in options:
            task = TuneTask.from_func(option.group.prim_func(optimized), target)
            if len(options) > 1:
                choice = choice or task.workload_key
            known = found.get(task.workload_key)
            if known is not None:
                found[task.workload_key] = dataclasses.replace(known, weight=known.weight + 1)
                continue
            worth = OPS[group.anchor.op].pattern in WORTH_TUNING
            found[task.workload_key] = ModelTask(task, 1, option.name, worth, choice)
    return list(found.values())


def tuned_tasks(tasks: Sequence[ModelTask]) -> list[ModelTask]:
    return [task for task in tasks if task.worth_tuning]


def parse_input_shapes(texts: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``["x=1,3,224,224", ...]`` (as ``--shape`` and the API's ``shape`` give them) as
    the shapes of model inputs; ValueError naming a text that is not NAME=D0,D1,...."""
    shapes = {}
    for text in texts:
        name, _, dims = text.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            shape = ()
        if not name or not shape or min(shape) < 1:
            raise ValueError(f"{text!r} is not NAME=D0,D1,... with positive sizes")
        shapes[name] = shape
    return shapes
