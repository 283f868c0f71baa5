"""Every test model compiled and run whole (fused, with default schedules) against
onnxruntime on random inputs: the importer, the passes, fusion and code generation
together."""

from __future__ import annotations

import numpy as np
import onnx_models
import onnxruntime
import pytest

from compiler.graph import GraphModule, import_onnx


@pytest.mark.parametrize("name", list(onnx_models.MODELS))
def test_the_compiled_model_computes_what_onnxruntime_does(name: str, rng) -> None:
    model = onnx_models.MODELS[name](rng)
    module = GraphModule(import_onnx(model))
    inputs = {
        input_name: rng.standard_normal(kind.shape).astype(kind.dtype)
        for input_name, kind in module.plan.inputs.items()
    }
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    expected = session.run(None, inputs)
    ours = module.run(**inputs)
    assert list(ours) == [output.name for output in session.get_outputs()]
    for mine, theirs in zip(ours.values(), expected, strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)
