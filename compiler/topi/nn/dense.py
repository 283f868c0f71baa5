"""Matrix products: matmul, dense (x @ W.T + b, activation fused) and batch_matmul."""

from __future__ import annotations

from compiler import te
from compiler.ir import expr as E
from compiler.ir.expr import PrimExpr
from compiler.te import Tensor
from compiler.topi.elemwise import ACTIVATIONS
from compiler.topi.errors import OperatorError
from compiler.topi.utils import check_bool, check_same_dtype, check_tensor, same_dim, shape_str


def matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
    """``op(a) @ op(b)`` for 2-D tensors, where ``op`` transposes when asked.

    Without transposes ``a`` is (M, K) and ``b`` is (K, N); the result is (M, N).
    """
    check_tensor("matmul", "a", a, ndim=2)
    check_tensor("matmul", "b", b, ndim=2)
    check_bool("matmul", "transpose_a", transpose_a)
    check_bool("matmul", "transpose_b", transpose_b)
    check_same_dtype("matmul", {"a": a, "b": b})
    m, ka = (a.shape[1], a.shape[0]) if transpose_a else (a.shape[0], a.shape[1])
    kb, n = (b.shape[1], b.shape[0]) if transpose_b else (b.shape[0], b.shape[1])
    _check_reduction_dims("matmul", a, b, ka, kb)
    k = te.reduce_axis((0, ka), name="k")

    def element(i: PrimExpr, j: PrimExpr) -> PrimExpr:
        left = a[k, i] if transpose_a else a[i, k]
        right = b[j, k] if transpose_b else b[k, j]
        return te.sum(left * right, axis=k)

    return te.compute((m, n), element, name="T_matmul")


def dense(
    x: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str | None = None
) -> Tensor:
    """``activation(x @ weight.T + bias)``: x is (M, K), weight (N, K), bias (N,).

    The bias and the activation form one elementwise compute after the reduction
    (a reduction must be a compute's whole body), so a schedule that inlines or
    fuses that epilogue gets the activation with it.
    """
    check_tensor("dense", "x", x, ndim=2)
    check_tensor("dense", "weight", weight, ndim=2)
    inputs = {"x": x, "weight": weight}
    if bias is not None:
        inputs["bias"] = check_tensor("dense", "bias", bias, ndim=1)
    check_same_dtype("dense", inputs)
    if activation is not None and (
        not isinstance(activation, str) or activation not in ACTIVATIONS
    ):
        raise OperatorError(
            f"dense: activation must be None or one of {', '.join(ACTIVATIONS)}, got {activation!r}"
        )
    if activation in ("gelu", "sigmoid") and not E.is_float(x.dtype):
        raise OperatorError(f"dense: activation {activation!r} needs a float dtype, not {x.dtype}")
    _check_reduction_dims("dense", x, weight, x.shape[1], weight.shape[1])
    n = weight.shape[0]
    if bias is not None and not same_dim(bias.shape[0], n):
        raise OperatorError(
            f"dense: bias has shape {shape_str(bias)} but weight has {n} output features"
        )
    k = te.reduce_axis((0, x.shape[1]), name="k")
    product = te.compute(
        (x.shape[0], n), lambda i, j: te.sum(x[i, k] * weight[j, k], axis=k), name="T_dense"
    )
    if bias is None and activation is None:
        return product
    act = ACTIVATIONS[activation] if activation is not None else None

    def epilogue(i: PrimExpr, j: PrimExpr) -> PrimExpr:
        value = product[i, j] + bias[j] if bias is not None else product[i, j]
        return act(value) if act is not None else value

    return te.compute(product.shape, epilogue, name=f"T_dense_{activation or 'bias'}")


def batch_matmul(
    a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False
) -> Tensor:
    """Batched ``op(a) @ op(b)``: (batch, M, K) x (batch, K, N) -> (batch, M, N).

    A batch of 1 on either side broadcasts, as in TVM.
    """
    check_tensor("batch_matmul", "a", a, ndim=3)
    check_tensor("batch_matmul", "b", b, ndim=3)
    check_bool("batch_matmul", "transpose_a", transpose_a)
    check_bool("batch_matmul", "transpose_b", transpose_b)
    check_same_dtype("batch_matmul", {"a": a, "b": b})
    batch_a, batch_b = a.shape[0], b.shape[0]
    one = E.const(1)
    if not (same_dim(batch_a, batch_b) or same_dim(batch_a, one) or same_dim(batch_b, one)):
        raise OperatorError(
            f"batch_matmul: batch sizes differ: a {shape_str(a)}, b {shape_str(b)}; "
            "they must be equal or one of them 1"
        )
    batch = batch_b if same_dim(batch_a, one) else batch_a
    m, ka = (a.shape[2], a.shape[1]) if transpose_a else (a.shape[1], a.shape[2])
    kb, n = (b.shape[2], b.shape[1]) if transpose_b else (b.shape[1], b.shape[2])
    _check_reduction_dims("batch_matmul", a, b, ka, kb)
    k = te.reduce_axis((0, ka), name="k")

    def element(p: PrimExpr, i: PrimExpr, j: PrimExpr) -> PrimExpr:
        pa = p if same_dim(batch_a, batch) else E.const(0)
        pb = p if same_dim(batch_b, batch) else E.const(0)
        left = a[pa, k, i] if transpose_a else a[pa, i, k]
        right = b[pb, j, k] if transpose_b else b[pb, k, j]
        return te.sum(left * right, axis=k)

    return te.compute((batch, m, n), element, name="T_batch_matmul")


def _check_reduction_dims(op: str, a: Tensor, b: Tensor, ka: PrimExpr, kb: PrimExpr) -> None:
    if not same_dim(ka, kb):
        raise OperatorError(
            f"{op}: the reduction sizes differ: a {shape_str(a)} gives K={ka}, "
            f"b {shape_str(b)} gives K={kb}"
        )
