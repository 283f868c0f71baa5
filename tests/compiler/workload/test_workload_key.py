"""Workload keys: equal for equal computations however they were written, the same
for a spec and the operator called in Python, stable across processes; and the
document round trip with its errors."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from op_examples import EXAMPLES

from compiler import te, topi
from compiler.ir.function import PrimFunc
from compiler.ir.structural import structural_equal
from compiler.te import Tensor
from compiler.workload.key import workload_from_json, workload_key, workload_to_json
from compiler.workload.spec import WorkloadError, known_ops, workload_from_spec

ROOT = Path(__file__).resolve().parents[3]


def ph(*shape: int, name: str = "input") -> Tensor:
    """A placeholder named unlike the spec's own, which must not matter."""
    return te.placeholder(shape, name=name)


def unary(op: str) -> Callable[[], list[Tensor]]:
    def build() -> list[Tensor]:
        x = ph(3, 5)
        return [x, getattr(topi, op)(x)]

    return build


def binary(op: str) -> Callable[[], list[Tensor]]:
    def build() -> list[Tensor]:
        a, b = ph(3, 1, 5, name="lhs"), ph(4, 1, name="rhs")
        return [a, b, getattr(topi, op)(a, b)]

    return build


def reduction(op: str) -> Callable[[], list[Tensor]]:
    def build() -> list[Tensor]:
        x = ph(3, 5)
        return [x, getattr(topi, op)(x, None, False)]

    return build


def with_output(make: Callable[[], list[Tensor]], output: Callable[..., Tensor]) -> list[Tensor]:
    inputs = make()
    return [*inputs, output(*inputs)]


# The operators of EXAMPLES called directly, with the same sizes and options.
DIRECT: dict[str, Callable[[], list[Tensor]]] = {
    "matmul": lambda: with_output(lambda: [ph(5, 3), ph(3, 7)], topi.matmul),
    "batch_matmul": lambda: with_output(lambda: [ph(2, 5, 3), ph(2, 3, 7)], topi.batch_matmul),
    "dense": lambda: with_output(lambda: [ph(3, 5), ph(7, 5), ph(7)], topi.dense),
    "conv2d_nchw": lambda: with_output(
        lambda: [ph(1, 8, 9, 7), ph(6, 8, 3, 3)],
        lambda d, k: topi.conv2d_nchw(d, k, stride=2, padding=1),
    ),
    "conv2d_nhwc": lambda: with_output(
        lambda: [ph(1, 9, 7, 8), ph(3, 3, 4, 6)],
        lambda d, k: topi.conv2d_nhwc(d, k, padding=1, dilation=[1, 2], groups=2),
    ),
    "conv2d_winograd_nchw": lambda: with_output(
        lambda: [ph(1, 8, 9, 7), ph(6, 8, 3, 3)],
        lambda d, k: topi.conv2d_winograd_nchw(d, k, padding=1),
    ),
    "conv2d_nchw_bias_relu": lambda: with_output(
        lambda: [ph(1, 8, 9, 7), ph(6, 8, 3, 1), ph(6)],
        lambda d, k, b: topi.conv2d_nchw_bias_relu(d, k, b, padding=[1, 0, 2, 0]),
    ),
    "depthwise_conv2d_nchw": lambda: with_output(
        lambda: [ph(1, 8, 9, 9), ph(8, 1, 3, 3)], topi.depthwise_conv2d_nchw
    ),
    "max_pool2d": lambda: with_output(lambda: [ph(1, 3, 9, 9)], lambda d: topi.max_pool2d(d, 3)),
    "avg_pool2d": lambda: with_output(lambda: [ph(1, 3, 9, 9)], lambda d: topi.avg_pool2d(d, 3)),
    "global_avg_pool2d": lambda: with_output(lambda: [ph(1, 3, 9, 9)], topi.global_avg_pool2d),
    "softmax": lambda: with_output(lambda: [ph(3, 5)], topi.softmax),
    "log_softmax": lambda: with_output(lambda: [ph(3, 5)], topi.log_softmax),
    "layer_norm": lambda: with_output(lambda: [ph(3, 5, 7), ph(7), ph(7)], topi.layer_norm),
    "transpose": lambda: with_output(lambda: [ph(3, 5, 7)], topi.transpose),
    "reshape": lambda: with_output(lambda: [ph(3, 5, 7)], lambda x: topi.reshape(x, [5, -1])),
    "pad": lambda: with_output(lambda: [ph(3, 5)], lambda x: topi.pad(x, [1, 0], [0, 2])),
    "concatenate": lambda: with_output(
        lambda: [ph(3, 5), ph(2, 5)], lambda a, b: topi.concatenate([a, b])
    ),
    **{op: unary(op) for op in ("relu", "gelu", "sigmoid", "exp", "log", "sqrt", "tanh")},
    **{op: unary(op) for op in ("abs", "negative")},
    **{op: reduction(op) for op in ("sum", "max", "min", "mean")},
    **{
        op: binary(op)
        for op in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power")
    },
}


def test_every_registered_op_is_called_directly_here() -> None:
    assert sorted(DIRECT) == known_ops()


@pytest.mark.parametrize("op", sorted(DIRECT))
def test_a_spec_and_the_operator_called_in_python_have_one_key(op: str) -> None:
    direct = te.create_prim_func(DIRECT[op]()).with_attr("global_symbol", f"my_{op}")
    from_spec = workload_from_spec({"op": op, "args": EXAMPLES[op]})
    assert workload_key(direct) == workload_key(from_spec)
    assert structural_equal(direct.with_attr("global_symbol", "main"), from_spec)


def matmul(a_name: str = "A", b_name: str = "B", k_name: str = "k", block: str = "C") -> PrimFunc:
    a = te.placeholder((6, 4), name=a_name)
    b = te.placeholder((4, 5), name=b_name)
    k = te.reduce_axis((0, 4), name=k_name)
    c = te.compute((6, 5), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name=block)
    return te.create_prim_func([a, b, c])


def matmul_other_names() -> PrimFunc:
    lhs = te.placeholder((6, 4), name="lhs")
    rhs = te.placeholder((4, 5), name="rhs")
    r = te.reduce_axis((0, 4), name="reduce")
    c = te.compute((6, 5), lambda row, col: te.sum(lhs[row, r] * rhs[r, col], axis=r), name="C")
    return te.create_prim_func([lhs, rhs, c]).with_attr("global_symbol", "gemm")


def test_names_and_the_global_symbol_do_not_change_the_key() -> None:
    first, second = matmul(), matmul_other_names()
    assert first.script() != second.script()
    assert workload_key(first) == workload_key(second)
    key = workload_key(first)
    assert len(key) == 64 and int(key, 16) >= 0


def test_what_the_computation_is_changes_the_key() -> None:
    base = workload_key(matmul())
    renamed_block = workload_key(matmul(block="D"))
    other_size = workload_key(workload_from_spec({"op": "matmul", "args": EXAMPLES["matmul"]}))
    f64 = {"op": "matmul", "args": {**EXAMPLES["matmul"], "dtype": "float64"}}
    assert len({base, renamed_block, other_size, workload_key(workload_from_spec(f64))}) == 4
    keyed = matmul()
    assert workload_key(keyed) == base  # now kept on ``keyed``, never on a changed copy
    assert workload_key(keyed.with_attr("layout", "row_major")) != base


def test_the_key_is_stable_in_a_fresh_process() -> None:
    spec = {"op": "conv2d_nchw", "args": EXAMPLES["conv2d_nchw"]}
    script = (
        "import json, sys\n"
        "from compiler.workload.spec import workload_from_spec\n"
        "from compiler.workload.key import workload_key\n"
        "print(workload_key(workload_from_spec(json.loads(sys.argv[1]))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, json.dumps(spec)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
    )
    assert result.stdout.strip() == workload_key(workload_from_spec(spec))


@pytest.mark.parametrize("op", ["matmul", "conv2d_nchw_bias_relu", "layer_norm", "pad"])
def test_document_round_trip_keeps_the_key_and_the_names(op: str) -> None:
    func = workload_from_spec({"op": op, "args": EXAMPLES[op]})
    text = workload_to_json(func)
    back = workload_from_json(text)
    assert structural_equal(back, func)
    assert back.script() == func.script()
    assert workload_key(back) == workload_key(func)
    assert workload_from_json(json.loads(text)).script() == func.script()
    assert workload_to_json(back) == text


def _document(op: str = "matmul") -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        workload_to_json(workload_from_spec({"op": op, "args": EXAMPLES[op]}))
    )
    return document


def _shape_dim(document: dict[str, Any], buffer: int, dim: int) -> dict[str, Any]:
    entry: dict[str, Any] = document["buffers"][buffer]["shape"][dim]
    return entry


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d.pop("body"), r"^\$: missing field 'body'"),
        (lambda d: d.update(format="onnx"), r"^\$\.format: expected 'tensortune.primfunc'"),
        (lambda d: d["buffers"][0].update(dtype="float8"), r"^\$\.buffers\[0\]\.dtype"),
        (lambda d: _shape_dim(d, 0, 1).update(value=-3), r"^\$\.buffers\[0\]\.shape\[1\]: dim"),
        (lambda d: _shape_dim(d, 1, 0).update(value=0), r"^\$\.buffers\[1\]\.shape\[0\]: dim"),
        (lambda d: _shape_dim(d, 1, 0).update(value=2**31 - 1), r"^\$\.buffers\[1\]\.shape: "),
        (lambda d: _shape_dim(d, 0, 0).update(value=10**400), r"^\$\.buffers\[0\]\.shape\[0\]"),
        (lambda d: d["body"]["block"].update(name=7), r"^\$\.body\.block\.name: expected a str"),
        (lambda d: d.update(body=d["body"]["block"]["body"]), r"^\$\.body: a workload's body"),
    ],
)
def test_malformed_documents_name_the_field(edit: Callable[[dict[str, Any]], Any], expected: str):
    document = _document()
    edit(document)
    with pytest.raises(WorkloadError, match=expected):
        workload_from_json(document)
    with pytest.raises(WorkloadError, match=expected):
        workload_from_json(json.dumps(document))


def test_an_integer_constant_out_of_its_dtype_names_its_path() -> None:
    document = _document()
    loop = document["body"]["block"]["body"]
    loop["extent"]["value"] = 2**40
    with pytest.raises(
        WorkloadError, match=r"^\$\.body\.block\.body\.extent\.value: 1099511627776"
    ):
        workload_from_json(document)


def test_fields_the_reader_ignores_cannot_break_the_checks() -> None:
    document = _document()
    document["buffers"][0]["extra"] = {"node": "IntImm", "value": "x"}
    document["body"]["block"]["annotations"]["items"]["tag"] = {"node": "dict", "items": {}}
    assert workload_from_json(document).script() == workload_from_json(_document()).script()


def test_only_prim_funcs_have_keys() -> None:
    with pytest.raises(WorkloadError, match="workload_from_spec"):
        workload_key({"op": "matmul", "args": EXAMPLES["matmul"]})  # type: ignore[arg-type]
    with pytest.raises(WorkloadError, match="takes a PrimFunc"):
        workload_to_json("main")  # type: ignore[arg-type]
