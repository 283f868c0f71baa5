"""``--shape`` and ``--arg`` name a workload of every op: the spec they make is one
``normalize_spec`` accepts, and it builds the workload the numbers describe."""

from __future__ import annotations

import pytest

from compiler.workload.spec import OPS, WorkloadError, normalize_spec, workload_from_spec
from tuner.cli.shape_args import shape_arguments

# Values for the required arguments that numbers do not fill.
NAMED = {
    "pad_before": [1, 0],
    "pad_after": [0, 2],
    "newshape": [6, 4],
    "shapes": [[2, 3], [4, 3]],
}


def numbers_for(op: str) -> list[int] | None:
    arguments = shape_arguments(op)
    if arguments.shapes:
        return [4, 6]
    if not arguments.sizes:
        return None
    return [1 if name == "batch" else 3 if name == "kernel" else 8 for name in arguments.sizes]


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_op_is_named_by_shape_and_args(op):
    arguments = shape_arguments(op)
    named = {name: NAMED[name] for name in arguments.named}
    spec = arguments.spec(numbers_for(op), named)
    func = workload_from_spec(spec)
    assert normalize_spec(spec)["op"] == op
    if arguments.shapes:
        assert [int(d) for d in func.params[0].shape] == [4, 6]


def test_sizes_fill_required_arguments_in_order_and_args_the_rest():
    spec = shape_arguments("conv2d_nchw").spec([1, 16, 28, 28, 32, 3], {"stride": 2})
    assert spec == {
        "op": "conv2d_nchw",
        "args": {
            "batch": 1,
            "in_channels": 16,
            "height": 28,
            "width": 28,
            "out_channels": 32,
            "kernel": 3,
            "stride": 2,
        },
    }


def test_a_binary_op_gets_the_shape_for_both_operands():
    spec = shape_arguments("add").spec([3, 5], {})
    assert spec["args"] == {"shape_a": [3, 5], "shape_b": [3, 5]}


def test_unknown_op_is_refused():
    with pytest.raises(WorkloadError, match="unknown operator 'conv9d'"):
        shape_arguments("conv9d")
