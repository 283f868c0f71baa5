"""A whole model on a GPU (``compiler.graph.executor.build_graph_cuda`` builds it):
its plan run on device buffers. The weights are uploaded once, every value of the
model has its own device buffer for the life of the runner, and a run copies only
the inputs in and the outputs out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from compiler.graph.plan import Plan
from compiler.runtime import cuda_driver as cu
from compiler.runtime.cuda_module import CudaModule
from compiler.runtime.gpu_binary import GPUBinary


class CudaGraphRunner:
    """``plan`` on GPU ``device``, its functions from ``binary``; ``close`` frees the
    device memory (so does the garbage collector)."""

    def __init__(
        self,
        plan: Plan,
        binary: GPUBinary,
        weights: Mapping[str, np.ndarray],
        device: int = 0,
    ) -> None:
        self.plan = plan
        self.module = CudaModule(binary, device)
        try:
            self._pointers = self._allocate()
            for name, array in weights.items():
                kind = plan.types[name]
                cu.copy_to_device(self._pointers[name], np.require(array, kind.dtype, "C"))
            self._launches = [
                launch
                for step in plan.steps
                for launch in self.module.launches(
                    step.function,
                    [*(self._pointers[v] for v in step.inputs), self._pointers[step.output]],
                )
            ]
        except BaseException:
            self.module.close()
            raise

    def _allocate(self) -> dict[str, int]:
        """A device buffer for every value; a view shares its source's."""
        views = {view.output: view.source for view in self.plan.views}
        pointers = {
            name: self.module.allocate(_nbytes(kind.shape, kind.dtype))
            for name, kind in self.plan.types.items()
            if name not in views
        }
        for output, source in views.items():
            pointers[output] = pointers[source]
        return pointers

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The outputs for ``inputs`` (checked by the caller), as new host arrays."""
        for name, array in inputs.items():
            cu.copy_to_device(self._pointers[name], np.ascontiguousarray(array))
        for launch in self._launches:
            launch()
        self.module.synchronize()
        outputs = {}
        for name in self.plan.outputs:
            kind = self.plan.types[name]
            outputs[name] = np.empty(kind.shape, kind.dtype)
            cu.copy_to_host(outputs[name], self._pointers[name])
        return outputs

    def close(self) -> None:
        self.module.close()


def _nbytes(shape: tuple[int, ...], dtype: str) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize
