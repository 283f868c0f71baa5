"""Whole models for cuda targets: a ResNet-style block and a BERT-style layer build
(lower and link) for sm_80 and sm_90 without a GPU, their default GPU kernels run in
the GPU simulator step by step compute what onnxruntime computes, and on a GPU
``GraphModule`` runs them there."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_models
import onnxruntime
import pytest
from gpu_simulator import simulate

from compiler.graph import GraphModule, import_onnx
from compiler.graph.executor import build_graph_cuda, compile_graph
from compiler.graph.plan import Plan
from compiler.lower.gpu_kernels import lower_gpu
from compiler.runtime.cuda_driver import CudaError, cuda_available, device_arch
from compiler.schedule.default_gpu import apply_gpu_default_schedule
from compiler.target.cuda import CudaTarget

MODELS = ("resnet_block", "transformer_layer")
NO_DEVICE = cuda_available()


def _expected(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, inputs)


def _inputs(plan: Plan, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {n: rng.standard_normal(k.shape).astype(k.dtype) for n, k in plan.inputs.items()}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", MODELS)
def test_a_model_builds_for_a_gpu_without_one(name: str, arch: str, rng) -> None:
    graph = import_onnx(onnx_models.MODELS[name](rng))
    plan, binary, weights = build_graph_cuda(graph, f"cuda -arch={arch}")
    assert binary.arch == arch and binary.cubin
    built = {function.name for function in binary.functions}
    assert {step.function for step in plan.steps} == built
    assert set(weights) <= set(plan.types)


@pytest.mark.parametrize("name", MODELS)
def test_a_models_gpu_kernels_compute_what_onnxruntime_does(name: str, rng) -> None:
    """The plan run step by step, each function's default GPU kernels in the
    simulator, on host arrays."""
    model = onnx_models.MODELS[name](rng)
    cuda = CudaTarget.parse("cuda -arch=sm_80")
    plan, functions, weights = compile_graph(import_onnx(model), conv_block=0, target=cuda)
    scheduled = apply_gpu_default_schedule(functions, cuda)
    programs = {n: lower_gpu(f, n, cuda.capabilities) for n, f in scheduled.items()}
    inputs = _inputs(plan, rng)
    values = {**{k: np.asarray(v) for k, v in weights.items()}, **inputs}

    def resolve_views() -> None:
        for view in plan.views:
            if view.source in values and view.output not in values:
                values[view.output] = values[view.source].reshape(plan.types[view.output].shape)

    resolve_views()
    for step in plan.steps:
        kind = plan.types[step.output]
        out = np.full(kind.shape, np.nan, dtype=kind.dtype)
        simulate(programs[step.function], [*(values[v].copy() for v in step.inputs), out])
        values[step.output] = out
        resolve_views()
    for output, theirs in zip(plan.outputs, _expected(model, inputs), strict=True):
        np.testing.assert_allclose(values[output], theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(NO_DEVICE is None, reason="a GPU is here: the device test runs instead")
def test_a_model_for_a_gpu_on_a_host_without_one_says_why(rng) -> None:
    graph = import_onnx(onnx_models.MODELS["mlp"](rng))
    with pytest.raises(CudaError):
        GraphModule(graph, "cuda -arch=sm_80")


@pytest.mark.skipif(NO_DEVICE is not None, reason=f"no usable GPU: {NO_DEVICE}")
@pytest.mark.parametrize("name", MODELS)
def test_a_model_runs_on_the_gpu_as_onnxruntime_does(name: str, rng) -> None:
    model = onnx_models.MODELS[name](rng)
    module = GraphModule(import_onnx(model), f"cuda -arch={device_arch(0)}")
    inputs = _inputs(module.plan, rng)
    ours = module.run(**inputs)
    for mine, theirs in zip(ours.values(), _expected(model, inputs), strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)
    assert module.run(**inputs).keys() == ours.keys()  # a second run reuses the buffers
