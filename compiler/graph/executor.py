"""Running a whole model: its fused groups compiled into one module (each with the
tuning database's best schedule where it has one) and called in order on buffers
that are allocated once, values whose lives do not overlap sharing memory
(``compiler.graph.memory_plan``).

Groups that are the same workload (a block repeated through a network) are one
function of the module. What runs is a Plan (``compiler.graph.plan``): the steps
(function, values read, value made) and the type of every value, plain data, so that
``export`` writes a model as one shared library, the plan as JSON and the weights
as an .npz, and ``load`` runs it again without the compiler or the database.
Weights that a tuned kernel reads in its own layout are converted once, when the
model is built (``compiler.graph.weight_packing``), and exported converted.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from compiler.build import build_cuda, build_llvm
from compiler.graph.algorithms import choose
from compiler.graph.blocked_layout import DEFAULT_CONV_BLOCK, block_convolutions
from compiler.graph.cuda_executor import CudaGraphRunner
from compiler.graph.fuse import FusedGroup, fuse
from compiler.graph.ir import Graph, GraphError
from compiler.graph.memory_plan import allocate, plan_storage
from compiler.graph.passes import fold_scale_into_conv
from compiler.graph.plan import Plan, Step, View
from compiler.graph.reshape_sinking import sink_reshapes
from compiler.graph.weight_packing import pack_weights
from compiler.ir.function import IRModule, PrimFunc
from compiler.runtime import load_module
from compiler.runtime.blas_pool import check_not_forked
from compiler.runtime.gpu_binary import GPUBinary
from compiler.runtime.module import Module
from compiler.target.cuda import CudaTarget
from compiler.target.parse import Target, parse_target
from compiler.tuned.lookup import TuningLookup
from compiler.workload.key import workload_key

LIBRARY, PLAN, WEIGHTS = "model.so", "plan.json", "weights.npz"


def optimize(graph: Graph, *, conv_block: int | None = None) -> tuple[Graph, list[FusedGroup]]:
    """The graph after its passes, and its fused groups: the functions it becomes.
    The convolutions run in NCHW[b]c, each ``b`` the widest of ``conv_block`` and its
    halves that its channels split into (``compiler.graph.blocked_layout``; None:
    ``DEFAULT_CONV_BLOCK``), in NCHW with ``conv_block=0``."""
    graph.check()
    optimized = sink_reshapes(fold_scale_into_conv(graph))
    block = DEFAULT_CONV_BLOCK if conv_block is None else conv_block
    if block:
        optimized = block_convolutions(optimized, block)
    optimized.check()
    return optimized, fuse(optimized)


def compile_graph(
    graph: Graph,
    *,
    conv_block: int | None = None,
    target: str | Target = "llvm",
    database: TuningLookup | None = None,
) -> tuple[Plan, IRModule, dict[str, np.ndarray]]:
    """The plan of ``graph``, the module of its distinct functions (``f0``, ``f1``, ...,
    in the order they first run) and its weights. A group with other algorithms
    (``compiler.graph.algorithms``) is computed by the one that ran fastest on
    ``target`` by ``database``."""
    optimized, groups = optimize(graph, conv_block=conv_block)
    functions: dict[str, PrimFunc] = {}
    names: dict[str, str] = {}
    steps = []
    views = []
    for group in groups:
        if group.is_view:
            views.append(View(group.output, group.inputs[0]))
            continue
        chosen, func = choose(group, optimized, target, database)
        key = workload_key(func)
        if key not in names:
            names[key] = f"f{len(names)}"
            functions[names[key]] = func
        steps.append(Step(names[key], key, group.inputs, group.output, chosen.name))
    plan = Plan(
        dict(optimized.inputs),
        optimized.outputs,
        dict(optimized.types),
        tuple(steps),
        tuple(views),
    )
    return plan, IRModule(functions), dict(optimized.constants)


def build_graph_cuda(
    graph: Graph, target: str | CudaTarget, *, database: TuningLookup | None = None
) -> tuple[Plan, GPUBinary, dict[str, np.ndarray]]:
    """The plan of ``graph``, its functions built for GPU ``target`` (each with the
    database's best schedule for it, else the default GPU one; no device needed)
    and its weights. The model keeps its plain layouts (NCHW): the blocked ones are
    the CPU's, sized to its vector registers."""
    cuda = CudaTarget.parse(target)
    plan, functions, weights = compile_graph(graph, conv_block=0, target=cuda, database=database)
    return plan, build_cuda(functions, target=cuda, database=database), weights


class GraphModule:
    """A model compiled for ``target``: ``run(**inputs)`` returns its outputs by name.

    With ``database``, every function whose workload has a tuned schedule for the
    target is built with it; the others get the default schedule. A cuda target
    (``"cuda -arch=sm_90"``) runs the model on the first GPU
    (``compiler.graph.cuda_executor``); ``profile`` and ``export`` are the CPU's."""

    def __init__(
        self,
        graph: Graph,
        target: str | Target = "llvm",
        *,
        database: TuningLookup | None = None,
        conv_block: int | None = None,
    ) -> None:
        self._device: CudaGraphRunner | None = None
        parsed = parse_target(target)
        if isinstance(parsed, CudaTarget):
            plan, binary, weights = build_graph_cuda(graph, parsed, database=database)
            self.plan = plan
            self._device = CudaGraphRunner(plan, binary, weights)
            return
        plan, functions, weights = compile_graph(
            graph, conv_block=conv_block, target=parsed, database=database
        )
        module = build_llvm(functions, target=parsed, database=database)
        plan, packed = pack_weights(plan, module, weights)
        self._start(plan, module, packed)

    def _start(self, plan: Plan, module: Module, weights: Mapping[str, np.ndarray]) -> None:
        self.plan = plan
        self.module = module
        self._buffers = allocate(plan, plan_storage(plan))
        self._weight_names = tuple(weights)
        for name, array in weights.items():
            self._buffers[name] = np.require(array, requirements="C")
        for name, kind in plan.inputs.items():
            self._buffers[name] = np.empty(kind.shape, kind.dtype)
        for view in plan.views:
            self._buffers[view.output] = self._buffers[view.source].reshape(
                plan.types[view.output].shape
            )
        # Every call's arguments, the output last, checked and bound to pointers once:
        # the buffers never move, so a run calls the bare kernels.
        self._calls = []
        for step in plan.steps:
            function = module[step.function]
            arrays = [*(self._buffers[value] for value in step.inputs), self._buffers[step.output]]
            self._calls.append((function.raw, function.signature.bind(arrays)))

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> GraphModule:
        """A model written by ``export``."""
        root = Path(folder)
        plan = Plan.from_json(json.loads((root / PLAN).read_text()))
        with np.load(root / WEIGHTS) as stored:
            weights = {name: stored[name] for name in stored.files}
        loaded = cls.__new__(cls)
        loaded._device = None
        loaded._start(plan, load_module(str(root / LIBRARY)), weights)
        return loaded

    def export(self, folder: str | os.PathLike[str]) -> None:
        """Write the model to ``folder``: its functions as one shared library, the plan
        as JSON and the weights as an .npz (``load`` reads them back)."""
        self._on_the_cpu("export")
        root = Path(folder)
        root.mkdir(parents=True, exist_ok=True)
        self.module.export_library(str(root / LIBRARY))
        (root / PLAN).write_text(json.dumps(self.plan.to_json(), indent=1))
        weights: dict[str, Any] = {name: self._buffers[name] for name in self._weight_names}
        np.savez(root / WEIGHTS, **weights)

    def run(self, **inputs: np.ndarray) -> dict[str, np.ndarray]:
        """The model's outputs on ``inputs`` (one array per model input, by name), as
        new arrays. GraphError names an input that is missing, unknown or of the wrong
        shape or dtype."""
        if self._device is not None:
            return self._device.run(_checked_inputs(self.plan, inputs))
        self._set_inputs(inputs)
        check_not_forked()
        for kernel, pointers in self._calls:
            kernel(*pointers)
        return {name: self._buffers[name].copy() for name in self.plan.outputs}

    def profile(self, runs: int = 10, **inputs: np.ndarray) -> list[tuple[Step, float]]:
        """Where a run's time goes: each step with the median of its seconds over
        ``runs`` runs of the model on ``inputs``."""
        self._on_the_cpu("profile")
        self._set_inputs(inputs)
        check_not_forked()
        seconds: list[list[float]] = [[] for _ in self._calls]
        for _ in range(runs):
            for k, (kernel, pointers) in enumerate(self._calls):
                start = time.perf_counter()
                kernel(*pointers)
                seconds[k].append(time.perf_counter() - start)
        return [
            (step, float(np.median(s))) for step, s in zip(self.plan.steps, seconds, strict=True)
        ]

    def _set_inputs(self, inputs: Mapping[str, np.ndarray]) -> None:
        for name, given in _checked_inputs(self.plan, inputs).items():
            np.copyto(self._buffers[name], given)

    def _on_the_cpu(self, what: str) -> None:
        if self._device is not None:
            raise GraphError(f"{what} is for a model built for the CPU (an llvm target)")


def _checked_inputs(plan: Plan, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``inputs`` as arrays, each checked against the model's input of its name."""
    expected = plan.inputs
    unknown = sorted(set(inputs) - set(expected))
    missing = sorted(set(expected) - set(inputs))
    if unknown or missing:
        problems = [f"missing: {', '.join(missing)}"] if missing else []
        problems += [f"unknown: {', '.join(unknown)}"] if unknown else []
        raise GraphError(f"the model's inputs are {', '.join(expected)}; {'; '.join(problems)}")
    checked = {}
    for name, array in inputs.items():
        kind = expected[name]
        given = np.asarray(array)
        if given.shape != kind.shape or given.dtype != np.dtype(kind.dtype):
            raise GraphError(
                f"input {name!r}: the model takes {kind.shape} {kind.dtype}, got "
                f"{given.shape} {given.dtype}"
            )
        checked[name] = given
    return checked
