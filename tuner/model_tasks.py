"""The tasks of a model: its distinct fused workloads, how often each occurs, and
which are worth tuning (a reshape is a view, no workload at all).

Two groups of a model that compute the same thing on values of the same types are one
workload (``compiler.graph.fuse`` names their parameters by position), so a block
repeated through a network is one task of that weight: the model runs it weight
times, and one tuned schedule serves every occurrence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compiler.codegen.target import LLVMTarget
from compiler.graph.executor import optimize
from compiler.graph.ir import Graph
from compiler.graph.ops import OPS, Pattern
from tuner.task import TuneTask

# Groups whose anchor is one of these do arithmetic worth scheduling; the others
# (elementwise chains, reshapes, transposes, pads) move memory, which their default
# schedule already does at the speed of a copy.
WORTH_TUNING = (Pattern.COMPLEX, Pattern.REDUCTION)


@dataclass(frozen=True)
class ModelTask:
    task: TuneTask
    weight: int
    kind: str
    worth_tuning: bool

    @property
    def flop_count(self) -> int:
        """The model's FLOPs spent in this task: each occurrence's, times the weight."""
        return self.task.flop_count * self.weight


def extract_tasks(
    graph: Graph, target: str | LLVMTarget = "llvm", *, conv_block: int = 0
) -> list[ModelTask]:
    """The model's distinct workloads in the order they first run (with ``conv_block``,
    its convolutions in NCHW[conv_block]c, as ``GraphModule`` builds them then)."""
    optimized, groups = optimize(graph, conv_block=conv_block)
    found: dict[str, ModelTask] = {}
    for group in groups:
        if group.is_view:
            continue
        task = TuneTask.from_func(group.prim_func(optimized), target)
        known = found.get(task.workload_key)
        if known is not None:
            found[task.workload_key] = ModelTask(
                known.task, known.weight + 1, known.kind, known.worth_tuning
            )
            continue
        worth = OPS[group.anchor.op].pattern in WORTH_TUNING
        found[task.workload_key] = ModelTask(task, 1, group.name, worth)
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
