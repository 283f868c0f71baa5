"""A model's weights converted once into the layouts its tuned kernels read.

A kernel whose schedule rewrote the layout of a constant weight takes the weight
already converted and comes with a pack function for it (``compiler.lower.prepack``).
``pack_weights`` runs those pack functions when the model is built and points
each step at the converted copy, so no run converts anything and ``export`` stores
the converted weights; the caller's layout is kept only where some other step still
reads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from compiler.graph.ir import TensorType
from compiler.graph.plan import Plan
from compiler.runtime.module import Function
from compiler.runtime.prepacked import pack_array, packed_params

PACKED_SEPARATOR = "@"


def pack_weights(
    plan: Plan, functions: Mapping[str, Function], weights: Mapping[str, np.ndarray]
) -> tuple[Plan, dict[str, np.ndarray]]:
    """``plan`` reading converted weights wherever its functions take them, and the
    weights it then needs (a converted weight is named ``<weight>@<pack function>``)."""
    packed = dict(weights)
    types = dict(plan.types)
    steps = []
    for step in plan.steps:
        inputs = list(step.inputs)
        params = [p.name for p in functions[step.function].signature.params]
        for param, pack_name in packed_params(functions, step.function).items():
            position = params.index(param)
            weight = inputs[position]
            name = f"{weight}{PACKED_SEPARATOR}{pack_name}"
            if name not in packed:
                packed[name] = pack_array(functions[pack_name], weights[weight])
                types[name] = TensorType(packed[name].shape, str(packed[name].dtype))
            inputs[position] = name
        steps.append(dataclasses.replace(step, inputs=tuple(inputs)))
    read = {value for step in steps for value in step.inputs}
    read |= {view.source for view in plan.views} | set(plan.outputs)
    kept = {name: array for name, array in packed.items() if name in read}
    types = {name: kind for name, kind in types.items() if name not in packed or name in read}
    return dataclasses.replace(plan, steps=tuple(steps), types=types), kept
