"""On a CUDA GPU, real kernels against numpy: every operator's default GPU schedule,
points drawn from each GPU template and from the generated GPU space, and the known
SGEMM schedule, each built for the device's architecture and run on it.

The simulator checks the same programs without a GPU (test_gpu_lowering,
test_gpu_templates, test_gpu_rules) at tiny sizes; here they run at the sizes a GPU
is tuned at, where block counts, partial tiles and the limits of a real device show.
Skipped where no GPU is usable."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from op_examples import EXAMPLES

from compiler import build
from compiler.cuda_build import build_cuda_binary
from compiler.ir.function import IRModule, PrimFunc
from compiler.runtime.cuda_driver import cuda_available, device_arch
from compiler.runtime.cuda_module import CudaModule
from compiler.schedule import ScheduleError
from compiler.schedule.default_gpu import apply_gpu_default_schedule
from compiler.topi.reference import numpy_function
from compiler.workload.spec import normalize_spec, workload_from_normalized_spec
from tuner.space import TemplateSpace
from tuner.space.base import Decisions
from tuner.space.generated import GeneratedSpace

pytest.importorskip(
    "cuda.bindings.nvjitlink", reason="needs the cuda extra: pip install 'tensortune[cuda]'"
)

NO_DEVICE = cuda_available()
pytestmark = pytest.mark.skipif(
    NO_DEVICE is not None, reason=f"running kernels needs a CUDA GPU: {NO_DEVICE}"
)

CONV = {"batch": 1, "in_channels": 64, "height": 56, "width": 56, "out_channels": 64}
# The template spaces at sizes a GPU is tuned at, with partial tiles where the
# template allows them.
TEMPLATE_SPECS: dict[str, dict[str, Any]] = {
    "matmul.cuda": {"op": "matmul", "args": {"m": 1024, "n": 768, "k": 512}},
    "batch_matmul.cuda": {"op": "batch_matmul", "args": {"batch": 4, "m": 256, "n": 384, "k": 64}},
    "dense.cuda": {
        "op": "dense",
        "args": {"batch": 128, "in_features": 768, "out_features": 3072, "activation": "relu"},
    },
    "conv2d_nchw.cuda": {"op": "conv2d_nchw", "args": {**CONV, "kernel": 3, "padding": 1}},
    "depthwise_conv2d_nchw.cuda": {
        "op": "depthwise_conv2d_nchw",
        "args": {"batch": 1, "channels": 96, "height": 56, "width": 56, "kernel": 3, "padding": 1},
    },
}
GENERATED_SPECS: dict[str, dict[str, Any]] = {
    "matmul": {"m": 512, "n": 512, "k": 256},
    "dense": {"batch": 64, "in_features": 768, "out_features": 768},
    "conv2d_nchw": {**CONV, "out_channels": 32, "kernel": 3, "padding": 1},
    "softmax": {"shape": [128, 1024]},
    "layer_norm": {"shape": [128, 768]},
    "sum": {"shape": [1024, 4096], "axis": [1]},
    "relu": {"shape": [2048, 1024]},
}
DRAWN = 3
DRAWS = 64


def target() -> str:
    return f"cuda -arch={device_arch(0)}"


def random_inputs(func: PrimFunc, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        rng.uniform(-1.0, 1.0, size=[int(d.value) for d in p.shape]).astype(p.dtype)  # type: ignore[attr-defined]
        for p in func.params[:-1]
    ]


def run_on_device(func: PrimFunc, inputs: list[np.ndarray]) -> np.ndarray:
    """Build the scheduled ``func`` for this device and run it; the output starts as
    NaN so that an element no thread writes shows."""
    binary = build_cuda_binary(IRModule({"main": func}), target())
    out = func.params[-1]
    got = np.full([int(d.value) for d in out.shape], np.nan, dtype=out.dtype)  # type: ignore[attr-defined]
    with CudaModule(binary) as module:
        module(*inputs, got)
    return got


@pytest.mark.parametrize("op", sorted(EXAMPLES))
def test_the_default_gpu_schedule_of_every_operator_computes_what_the_cpu_build_does(
    op: str,
) -> None:
    spec = normalize_spec({"op": op, "args": EXAMPLES[op]})
    func = workload_from_normalized_spec(spec)
    inputs = random_inputs(func, seed=1)
    mod = apply_gpu_default_schedule(IRModule({"main": func}), target())
    got = run_on_device(mod["main"], inputs)
    out = func.params[-1]
    want = np.zeros([int(d.value) for d in out.shape], dtype=out.dtype)  # type: ignore[attr-defined]
    build(func, target="llvm")(*[a.copy() for a in inputs], want)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def legal_template_points(space: TemplateSpace, count: int, seed: int) -> list[Decisions]:
    rng = random.Random(seed)
    points: list[Decisions] = []
    for _ in range(DRAWS):
        point = space.random_decisions(rng)
        try:
            space.candidate(point)
        except ScheduleError:
            continue
        points.append(point)
        if len(points) == count:
            break
    return points


@pytest.mark.parametrize("name", sorted(TEMPLATE_SPECS))
def test_points_of_each_gpu_template_compute_what_numpy_does(name: str) -> None:
    spec = normalize_spec(TEMPLATE_SPECS[name])
    space = TemplateSpace(workload_from_normalized_spec(spec), name, target=target())
    inputs = random_inputs(space.func, seed=2)
    want = numpy_function(spec)(*inputs)
    points = legal_template_points(space, DRAWN, seed=5)
    assert points, f"{name}: no legal point in {DRAWS} draws"
    for point in points:
        got = run_on_device(space.program(space.candidate(point)).func, inputs)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3, err_msg=str(point))


def test_the_known_good_sgemm_point_computes_the_product() -> None:
    """128 x 128 block tiles, 8 x 8 per thread on 16 x 16 threads, steps of 8."""
    spec = normalize_spec({"op": "matmul", "args": {"m": 1024, "n": 1024, "k": 1024}})
    space = TemplateSpace(workload_from_normalized_spec(spec), "matmul.cuda", target=target())
    point = space.decisions_of(
        {
            "tile_y": (8, 1, 16, 8),
            "tile_x": (8, 1, 16, 8),
            "tile_k": (128, 8),
            "fetch_vector": 4,
            "unroll_k": True,
        }
    )
    inputs = random_inputs(space.func, seed=3)
    got = run_on_device(space.program(space.candidate(point)).func, inputs)
    np.testing.assert_allclose(got, inputs[0] @ inputs[1], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("op", sorted(GENERATED_SPECS))
def test_points_of_the_generated_gpu_space_compute_what_numpy_does(op: str) -> None:
    spec = normalize_spec({"op": op, "args": GENERATED_SPECS[op]})
    space = GeneratedSpace(workload_from_normalized_spec(spec), target=target())
    inputs = random_inputs(space.func, seed=4)
    want = numpy_function(spec)(*inputs)
    rng = random.Random(6)
    checked = 0
    for design in range(space.design_count):
        for _ in range(DRAWS):
            values = tuple(rng.choice(d.values) for d in space.decision_domains(design))
            try:
                candidate = space.candidate(Decisions(design, values))
                program = space.program(candidate).func
                got = run_on_device(program, inputs)
            except ScheduleError:
                continue
            np.testing.assert_allclose(
                got, want, rtol=1e-3, atol=1e-3, err_msg=str(candidate.trace)
            )
            checked += 1
            break
    assert checked, f"{op}: no design built in {DRAWS} draws each"
