"""Operator specs as data: every registered op builds, and malformed specs name the field."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from op_examples import EXAMPLES

import compiler
from compiler.ir.buffer import Buffer
from compiler.ir.expr import IntImm
from compiler.ir.function import PrimFunc
from compiler.ir.serialize import from_json, to_json_string
from compiler.workload.spec import OPS, WorkloadError, known_ops, normalize_spec, workload_from_spec

CONV = {
    "batch": 1,
    "in_channels": 64,
    "height": 56,
    "width": 56,
    "out_channels": 64,
    "kernel": 3,
    "stride": 1,
    "padding": 1,
    "dtype": "float32",
}


def test_every_registered_op_has_an_example() -> None:
    assert sorted(EXAMPLES) == known_ops()


@pytest.mark.parametrize("op", sorted(EXAMPLES))
def test_every_op_builds_a_prim_func(op: str) -> None:
    spec = {"op": op, "args": EXAMPLES[op]}
    func = workload_from_spec(json.loads(json.dumps(spec)))
    assert isinstance(func, PrimFunc)
    required = [a for a in OPS[op].args if a.required]
    assert len(func.params) >= 2
    assert {a.name for a in required} <= set(EXAMPLES[op])


@pytest.mark.parametrize("op", sorted(EXAMPLES))
def test_every_op_compiles_and_writes_every_output_element(op: str) -> None:
    func = workload_from_spec({"op": op, "args": EXAMPLES[op]})
    rng = np.random.default_rng(7)
    *inputs, output = func.params
    arrays = [rng.uniform(0.5, 2.0, _shape(p)).astype(p.dtype) for p in inputs]
    result = np.full(_shape(output), np.nan, dtype=output.dtype)
    compiler.build(func)(*arrays, result)
    assert np.isfinite(result).all()


def _shape(buffer: Buffer) -> tuple[int, ...]:
    return tuple(d.value for d in buffer.shape if isinstance(d, IntImm))


def test_a_spec_computes_its_operator() -> None:
    spec = {"op": "dense", "args": {**EXAMPLES["dense"], "activation": "relu"}}
    func = workload_from_spec(spec)
    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(_shape(p)).astype("float32") for p in func.params[:3])
    out = np.full((3, 7), np.nan, dtype="float32")
    compiler.build(func)(x, w, b, out)
    np.testing.assert_allclose(out, np.maximum(x @ w.T + b, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", sorted(EXAMPLES))
def test_one_spec_gives_one_canonical_json(op: str) -> None:
    """Two spellings of a spec (defaults left out or written) serialize identically,
    which is what makes the workload key of an op spec stable."""
    short = to_json_string(workload_from_spec({"op": op, "args": EXAMPLES[op]}))
    full = to_json_string(workload_from_spec(normalize_spec({"op": op, "args": EXAMPLES[op]})))
    assert short == full
    assert to_json_string(from_json(short)) == short


def test_conv2d_spec_from_the_brief() -> None:
    func = workload_from_spec({"op": "conv2d_nchw", "args": CONV})
    data, kernel, out = func.params
    assert [int(d) for d in data.shape] == [1, 64, 56, 56]
    assert [int(d) for d in kernel.shape] == [64, 64, 3, 3]
    assert [int(d) for d in out.shape] == [1, 64, 56, 56]


def test_normalize_fills_defaults_in_declared_order() -> None:
    short = normalize_spec({"op": "matmul", "args": {"k": 3, "m": 5, "n": 7}})
    full = normalize_spec(
        {
            "op": "matmul",
            "args": {
                "m": 5,
                "n": 7,
                "k": 3,
                "transpose_a": False,
                "transpose_b": False,
                "dtype": "float32",
            },
        }
    )
    assert short == full
    assert list(short["args"]) == ["m", "n", "k", "transpose_a", "transpose_b", "dtype"]
    assert json.dumps(short) == json.dumps(full)


def test_options_change_the_workload() -> None:
    plain = workload_from_spec({"op": "dense", "args": {**EXAMPLES["dense"], "bias": False}})
    fused = workload_from_spec({"op": "dense", "args": {**EXAMPLES["dense"], "activation": "gelu"}})
    assert len(plain.params) == 3
    assert len(fused.params) == 4
    assert "erf" in fused.script()
    f64 = workload_from_spec({"op": "matmul", "args": {"m": 2, "n": 2, "k": 2, "dtype": "float64"}})
    assert all(p.dtype == "float64" for p in f64.params)


def _error(spec: Any) -> str:
    with pytest.raises(WorkloadError) as info:
        workload_from_spec(spec)
    return str(info.value)


def _conv(**changes: Any) -> dict[str, Any]:
    args = {**CONV, **changes}
    return {"op": "conv2d_nchw", "args": {k: v for k, v in args.items() if v is not None}}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ([1, 2], "spec: must be a dict"),
        ("conv2d", "spec: must be a dict"),
        ({"args": {}}, "op: missing"),
        ({"op": "conv3d", "args": {}}, "op: unknown operator 'conv3d'"),
        ({"op": 7, "args": {}}, "op: unknown operator 7"),
        ({"op": "matmul", "args": [5, 7, 3]}, "args: must be a dict"),
        ({"op": "matmul", "args": {}, "key": 1}, "spec.key: unknown key"),
        (_conv(kernel=-3), "args.kernel: must be a positive integer, got -3"),
        (_conv(kernel=0), "args.kernel: must be a positive integer"),
        (_conv(kernel=[3, 0]), "args.kernel[1]: must be a positive integer, got 0"),
        (_conv(kernel=[3, 3, 3]), "args.kernel: must be a positive integer or a list"),
        (_conv(batch=None), "args.batch: missing"),
        (_conv(bogus=1), "args.bogus: unknown argument of conv2d_nchw"),
        (_conv(height=3.0), "args.height: must be a positive integer, got 3.0"),
        (_conv(height="56"), "args.height: must be a positive integer, got '56'"),
        (_conv(height=True), "args.height: must be a positive integer, got True"),
        (_conv(height=2**20 + 1), "args.height: 1048577 is larger than the limit"),
        (_conv(padding=-1), "args.padding: must be a non-negative integer"),
        (_conv(padding=[1, 2, 3]), "args.padding: must be a non-negative integer, [height"),
        (_conv(dtype="float128"), "args.dtype: must be one of float16, float32, float64"),
        (_conv(dtype=32), "args.dtype: must be one of"),
        (_conv(groups=3), "args.groups: in_channels 64 not divisible by groups 3"),
        (_conv(kernel=60), "args: conv2d_nchw: the height of the dilated kernel (60)"),
        (
            {
                "op": "pad",
                "args": {"shape": [2**15, 2**16], "pad_before": [1, 0], "pad_after": [0, 0]},
            },
            "args: tensor PadInput of shape (32769, 65536) has 2147549184 elements",
        ),
        (
            _conv(height=2**16, width=2**16, in_channels=2),
            "args: tensor data of shape (1, 2, 65536, 65536) has 8589934592 elements",
        ),
        (
            {"op": "dense", "args": {**EXAMPLES["dense"], "activation": "tanh"}},
            "args.activation: must be one of none, relu, gelu, sigmoid, got 'tanh'",
        ),
        ({"op": "dense", "args": {**EXAMPLES["dense"], "bias": 1}}, "args.bias: must be true"),
        ({"op": "softmax", "args": {"shape": []}}, "args.shape: must be a list of 1 to 8"),
        ({"op": "softmax", "args": {"shape": [3, -5]}}, "args.shape[1]: must be a positive"),
        ({"op": "softmax", "args": {"shape": [3, 5], "axis": 2}}, "args: softmax: axis 2 is out"),
        ({"op": "softmax", "args": {"shape": [3], "axis": 9}}, "args.axis: must be an axis"),
        ({"op": "sum", "args": {"shape": [3], "axis": "0"}}, "args.axis: must be null, an axis"),
        ({"op": "layer_norm", "args": {"shape": [3], "epsilon": "x"}}, "args.epsilon: must be"),
        (
            {"op": "layer_norm", "args": {"shape": [3], "epsilon": float("nan")}},
            "args.epsilon: must be a finite number",
        ),
        ({"op": "reshape", "args": {"shape": [6], "newshape": [4, -1]}}, "args: reshape: cannot"),
        ({"op": "reshape", "args": {"shape": [6], "newshape": [0, 6]}}, "args.newshape[0]"),
        (
            {"op": "add", "args": {"shape_a": [3, 4], "shape_b": [5]}},
            "args: add: shapes (3, 4) and (5,) do not broadcast",
        ),
        (
            {"op": "concatenate", "args": {"shapes": [[3, 4], [3, 5]]}},
            "args: concatenate: tensors[1] has shape (3, 5)",
        ),
        ({"op": "concatenate", "args": {"shapes": []}}, "args.shapes: must be a list of 1 to 64"),
        (
            {"op": "max_pool2d", "args": {**EXAMPLES["max_pool2d"], "padding": 3}},
            "args: max_pool2d: padding top 3 must be smaller than the kernel",
        ),
        ({"op": "transpose", "args": {"shape": [2, 3], "axes": [0, 0]}}, "args: transpose: axes"),
    ],
)
def test_malformed_specs_name_the_field(spec: Any, expected: str) -> None:
    message = _error(spec)
    assert expected in message, message


def test_unknown_op_lists_the_known_ones() -> None:
    message = _error({"op": "conv3d", "args": {}})
    for op in known_ops():
        assert op in message


def test_missing_argument_says_what_it_needs() -> None:
    assert _error({"op": "matmul", "args": {"m": 2, "n": 2}}) == (
        "args.k: missing (a positive integer), required by matmul"
    )


def test_nothing_is_evaluated() -> None:
    message = _error(_conv(height="__import__('os').system('true')"))
    assert message.startswith("args.height: must be a positive integer")


def test_workload_error_is_a_value_error() -> None:
    assert issubclass(WorkloadError, ValueError)
