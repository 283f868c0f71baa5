"""GPU tuning end to end: fp32 GEMM 4096^3 and conv2d NCHW 1x64x56x56 (64 filters,
3x3, pad 1) tuned for this machine's GPU, against cuBLAS's SGEMM and cuDNN's (or
cupy's im2col + cuBLAS) convolution, timed in the same run.

    pip install -e '.[cuda]' cupy-cuda12x        # on a host with an NVIDIA GPU
    python benchmarks/gpu.py --trials 512 --json  # last line: one JSON object

The target is the first GPU's architecture (``cuda -arch=sm_XX``). Each workload is
tuned from scratch with the local workers into a temporary database (the GPU
template: block and thread tiles, shared-memory staging), then built from that
database and timed with CUDA events; its result is checked against numpy. Tensor
cores are off on both sides: cupy is told not to use TF32 (``CUPY_TF32=0``), and
our kernels use plain fp32 FMA. Nothing else should run on the GPU meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures
os.environ["CUPY_TF32"] = "0"  # before cupy is imported: fp32 GEMM without tensor cores

import numpy as np  # noqa: E402

from compiler.runtime import cuda_driver  # noqa: E402
from tuner.progress import Progress  # noqa: E402
from tuner.task import TuneTask  # noqa: E402

sys.path.append(_HERE)
from baselines import reference_of  # noqa: E402
from tuned_workloads import CONV, tune_from_scratch  # noqa: E402

GEMM = {"op": "matmul", "args": {"m": 4096, "n": 4096, "k": 4096}}
WORKLOADS = {"gemm": ("gemm_4096", GEMM), "conv2d": ("conv2d_1x64x56x56_k3", CONV)}


def gpu_seconds(run: Callable[[], Any], repeat: int = 50) -> float:
    """The median time of ``run`` on the GPU, by cupy's event-timed benchmark."""
    from cupyx.profiler import benchmark

    result = benchmark(run, n_repeat=repeat, n_warmup=5)
    return float(np.median(result.gpu_times[0]))


def cublas_seconds(arrays: list[np.ndarray]) -> tuple[str, float]:
    import cupy

    a, b = (cupy.asarray(x) for x in arrays[:2])
    return "cuBLAS SGEMM (cupy.matmul)", gpu_seconds(lambda: cupy.matmul(a, b))


def conv_seconds(spec: dict[str, Any], arrays: list[np.ndarray]) -> tuple[str, float]:
    """cuDNN's forward convolution where cupy has cuDNN, else im2col + cuBLAS."""
    import cupy

    data, kernel = (cupy.asarray(x) for x in arrays[:2])
    pad = spec["args"]["padding"]
    try:
        from cupy import cudnn

        out = cupy.empty(arrays[-1].shape, dtype=cupy.float32)

        def run_cudnn() -> None:
            cudnn.convolution_forward(data, kernel, None, out, (pad, pad), (1, 1), (1, 1), 1)

        return "cuDNN (cupy.cudnn)", gpu_seconds(run_cudnn)
    except (ImportError, AttributeError, RuntimeError):
        pass
    k = kernel.shape[-1]
    padded = cupy.pad(data, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = cupy.lib.stride_tricks.sliding_window_view(padded, (k, k), axis=(2, 3))
    flat_kernel = kernel.reshape(kernel.shape[0], -1)

    def run_im2col() -> None:
        columns = windows.transpose(0, 2, 3, 1, 4, 5).reshape(-1, flat_kernel.shape[1])
        cupy.matmul(flat_kernel, columns.T)

    return "cupy im2col + cuBLAS", gpu_seconds(run_im2col)


def bench(name: str, spec: dict[str, Any], target: str, args: argparse.Namespace) -> dict[str, Any]:
    task = TuneTask.from_spec(spec, target)
    rng = np.random.default_rng(0)
    shapes = [tuple(int(d) for d in p.shape) for p in task.func.params]  # type: ignore[attr-defined]
    arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    started = time.monotonic()
    progress = Progress(args.trials, label=name)
    result, module = tune_from_scratch(
        task, trials=args.trials, seed=0, space="template", progress=progress
    )
    tune_seconds = time.monotonic() - started
    out = [a.copy() for a in arrays]
    module(*out)
    expected = reference_of(task)(*arrays[:-1])
    np.testing.assert_allclose(out[-1], expected, rtol=1e-3, atol=1e-3)
    timed = module.time_evaluator(module.entry_name, number=20, repeat=5)(*out)
    ours = task.gflops(float(np.median(timed.results)))
    if spec is GEMM:
        peer_name, peer_seconds = cublas_seconds(arrays)
    else:
        peer_name, peer_seconds = conv_seconds(spec, arrays)
    peer = task.gflops(peer_seconds)
    row = {
        "target": target,
        "trials": result.measured,
        "errors": result.errors,
        "tune_seconds": round(tune_seconds, 1),
        "tuned_gflops": round(ours, 1),
        "peer": peer_name,
        "peer_gflops": round(peer, 1),
        "tuned_vs_peer": round(ours / peer, 3),
    }
    print(
        f"{name}: tuned {ours:.0f} GFLOP/s, {peer_name} {peer:.0f} GFLOP/s: "
        f"{ours / peer:.2f}x ({result.measured} trials, {result.errors} errors, "
        f"{tune_seconds:.0f} s)"
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=512, help="trials per workload")
    parser.add_argument("--only", choices=sorted(WORKLOADS), help="one workload")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    args = parser.parse_args()
    if args.trials < 1:
        parser.error("--trials must be at least 1")
    reason = cuda_driver.cuda_available()
    if reason is not None:
        sys.exit(f"benchmarks/gpu.py needs an NVIDIA GPU: {reason}")
    try:
        import cupy  # noqa: F401
    except ImportError:
        sys.exit("benchmarks/gpu.py times cuBLAS and cuDNN through cupy: pip install cupy-cuda12x")
    target = f"cuda -arch={cuda_driver.device_arch(0)}"
    print(f"target: {target}")
    report = {}
    for short, (key, spec) in WORKLOADS.items():
        if args.only in (None, short):
            report[key] = bench(key, spec, target, args)
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()
