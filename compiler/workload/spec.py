"""Operator workloads as data: ``{"op": "conv2d_nchw", "args": {...}}`` -> PrimFunc.

A spec is what a user, the HTTP API or the database sends to name an operator
from ``compiler.topi`` with concrete sizes. It is plain JSON and never evaluated:
each registered op declares its arguments (name, kind, default), every value is
checked against its kind, and only then do the library's own constructors build
the PrimFunc ``te.create_prim_func([inputs..., output])``. Anything malformed
raises ``WorkloadError`` naming the field, e.g. ``args.kernel: must be a positive
integer, got -3``.

Op names and argument meanings follow ``compiler.topi``. The module is longer than
most because it holds the whole table: the argument kinds, then one declaration and
a few-line builder per op, which read best side by side.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from compiler import te, topi
from compiler.errors import CompilerError
from compiler.ir import expr as E
from compiler.ir.function import PrimFunc
from compiler.ir.layout_free import LayoutFreeError, mark_layout_free
from compiler.te import Tensor
from compiler.topi.utils import normalize_axes

MAX_DIM = 2**20
MAX_ELEMENTS = 2**31
MAX_NDIM = 8
MAX_TENSORS = 64
DTYPES = E.FLOAT_DTYPES
SPEC_KEYS = ("op", "args", "constants")


class WorkloadError(CompilerError, ValueError):
    """A malformed workload spec; the message starts with the offending field."""


_REQUIRED = object()


@dataclass(frozen=True)
class Kind:
    """What an argument accepts: ``what`` says it in words (for messages), ``check``
    validates a value at a field and returns it, or raises WorkloadError."""

    what: str
    check: Callable[[str, Any], Any]

    def __call__(self, field: str, value: Any) -> Any:
        return self.check(field, value)


@dataclass(frozen=True)
class Arg:
    """One argument of an op; without a default it is required."""

    name: str
    kind: Kind
    default: Any = _REQUIRED

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


@dataclass(frozen=True)
class OpSpec:
    """A registered op: its arguments in order, and the builder that turns checked
    arguments into the tensors [inputs..., output]."""

    name: str
    args: tuple[Arg, ...]
    build: Callable[..., list[Tensor]]


OPS: dict[str, OpSpec] = {}


def known_ops() -> list[str]:
    return sorted(OPS)


def normalize_spec(spec: Any) -> dict[str, Any]:
    """The spec checked, with every default filled in and args in declared order, so
    two spellings of one workload give the same dict."""
    if not isinstance(spec, Mapping):
        raise WorkloadError(
            f"spec: must be a dict with keys 'op' and 'args', got {type(spec).__name__}"
        )
    for key in spec:
        if key not in SPEC_KEYS:
            raise WorkloadError(
                f"spec.{key}: unknown key; a spec has only {', '.join(map(repr, SPEC_KEYS))}"
            )
    if "op" not in spec:
        raise WorkloadError(f"op: missing; known ops: {', '.join(known_ops())}")
    name = spec["op"]
    if not isinstance(name, str) or name not in OPS:
        raise WorkloadError(f"op: unknown operator {name!r}; known ops: {', '.join(known_ops())}")
    args = spec.get("args", {})
    if not isinstance(args, Mapping):
        raise WorkloadError(f"args: must be a dict of argument values, got {type(args).__name__}")
    normalized: dict[str, Any] = {"op": name, "args": _check_args(OPS[name], args)}
    constants = _check_constants(spec.get("constants", []))
    if constants:
        normalized["constants"] = constants
    return normalized


def _check_constants(value: Any) -> list[str]:
    """The ``constants`` of a spec: names of inputs whose data stays the same from call
    to call (weights), which a schedule may store in any layout."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WorkloadError(
            f'constants: must be a list of input names (such as ["W"]), got {value!r}'
        )
    return sorted(set(value))


def _check_args(op: OpSpec, args: Mapping[Any, Any]) -> dict[str, Any]:
    declared = {a.name: a for a in op.args}
    for key in args:
        if key not in declared:
            raise WorkloadError(
                f"args.{key}: unknown argument of {op.name}; expected {', '.join(declared)}"
            )
    checked = {}
    for arg in op.args:
        if arg.name in args:
            checked[arg.name] = arg.kind(f"args.{arg.name}", args[arg.name])
        elif arg.required:
            raise WorkloadError(
                f"args.{arg.name}: missing ({arg.kind.what}), required by {op.name}"
            )
        else:
            checked[arg.name] = arg.default
    return checked


def workload_from_spec(spec: Any) -> PrimFunc:
    """The PrimFunc a spec names; raises WorkloadError for any malformed spec."""
    return workload_from_normalized_spec(normalize_spec(spec))


def workload_from_normalized_spec(normalized: Mapping[str, Any]) -> PrimFunc:
    """The PrimFunc of a spec ``normalize_spec`` returned, without checking it again
    (a caller that holds the normalized spec normalizes once)."""
    op = OPS[normalized["op"]]
    try:
        tensors = op.build(**normalized["args"])
    except topi.OperatorError as err:
        raise WorkloadError(f"args: {err}") from err
    func = te.create_prim_func(tensors)
    _check_sizes(func)
    if "constants" not in normalized:
        return func
    try:
        return mark_layout_free(func, normalized["constants"])
    except LayoutFreeError as err:
        raise WorkloadError(f"constants: {err}") from None


def _check_sizes(func: PrimFunc) -> None:
    for buffer in (*func.params, *func.root_block.alloc_buffers):
        elements = math.prod(d.value for d in buffer.shape if isinstance(d, E.IntImm))
        if elements > MAX_ELEMENTS:
            dims = ", ".join(str(d) for d in buffer.shape)
            raise WorkloadError(
                f"args: tensor {buffer.name} of shape ({dims}) has {elements} elements, more "
                f"than the limit 2**31; use smaller dimensions"
            )


# ---- argument kinds -------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bounded_int(minimum: int, what: str) -> Kind:
    def check(field: str, value: Any) -> int:
        if not _is_int(value) or value < minimum:
            raise WorkloadError(f"{field}: must be {what}, got {value!r}")
        if value > MAX_DIM:
            raise WorkloadError(f"{field}: {value} is larger than the limit {MAX_DIM} (2**20)")
        return value

    return Kind(what, check)


def _list_of(item: Kind, lengths: range, what: str) -> Kind:
    def check(field: str, value: Any) -> list[Any]:
        if not isinstance(value, list) or len(value) not in lengths:
            raise WorkloadError(f"{field}: must be {what}, got {value!r}")
        return [item(f"{field}[{k}]", v) for k, v in enumerate(value)]

    return Kind(what, check)


def _int_or_list(item: Kind, lengths: range, what: str) -> Kind:
    as_list = _list_of(item, lengths, what)

    def check(field: str, value: Any) -> int | list[int]:
        if isinstance(value, list):
            return as_list(field, value)
        if not _is_int(value):
            raise WorkloadError(f"{field}: must be {what}, got {value!r}")
        return item(field, value)

    return Kind(what, check)


def _optional(kind: Kind) -> Kind:
    """``kind`` or null; ``kind.what`` should say that null is allowed."""
    return Kind(kind.what, lambda f, v: None if v is None else kind(f, v))


def _check_axis(field: str, value: Any) -> int:
    if not _is_int(value) or not -MAX_NDIM <= value < MAX_NDIM:
        raise WorkloadError(f"{field}: must be an axis (an integer from -8 to 7), got {value!r}")
    return value


def _check_flag(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise WorkloadError(f"{field}: must be true or false, got {value!r}")
    return value


def _check_number(field: str, value: Any) -> float:
    finite = isinstance(value, float) and math.isfinite(value)
    if not (finite or (_is_int(value) and abs(value) <= 2**53)):
        raise WorkloadError(f"{field}: must be a finite number, got {value!r}")
    return float(value)


def _choice(options: tuple[str, ...]) -> Kind:
    what = "one of " + ", ".join(options)

    def check(field: str, value: Any) -> str:
        if not isinstance(value, str) or value not in options:
            raise WorkloadError(f"{field}: must be {what}, got {value!r}")
        return value

    return Kind(what, check)


def _check_newshape_item(field: str, value: Any) -> int:
    if _is_int(value) and value == -1:
        return value
    return POSITIVE(field, value)


NDIMS = range(1, MAX_NDIM + 1)
POSITIVE = _bounded_int(1, "a positive integer")
NON_NEGATIVE = _bounded_int(0, "a non-negative integer")
AXIS = Kind("an axis", _check_axis)
FLAG = Kind("true or false", _check_flag)
NUMBER = Kind("a finite number", _check_number)
SHAPE_KIND = _list_of(POSITIVE, NDIMS, "a list of 1 to 8 positive integers")
SHAPES = _list_of(SHAPE_KIND, range(1, MAX_TENSORS + 1), "a list of 1 to 64 shapes")
NEWSHAPE = _list_of(
    Kind("a positive integer or -1", _check_newshape_item),
    NDIMS,
    "a list of 1 to 8 positive integers or -1",
)
WIDTHS = _list_of(NON_NEGATIVE, NDIMS, "a list of 1 to 8 non-negative integers")
AXES = _optional(_int_or_list(AXIS, NDIMS, "null, an axis or a list of axes"))
PERMUTATION = _optional(_list_of(AXIS, NDIMS, "null or a list of axes"))
PAIR = _int_or_list(POSITIVE, range(2, 3), "a positive integer or a list [height, width]")
PADDING = _int_or_list(
    NON_NEGATIVE,
    range(2, 5, 2),
    "a non-negative integer, [height, width] or [top, left, bottom, right]",
)


def dim(name: str, default: Any = _REQUIRED) -> Arg:
    return Arg(name, POSITIVE, default)


def flag(name: str, default: bool = False) -> Arg:
    return Arg(name, FLAG, default)


def choice(name: str, options: tuple[str, ...], default: str) -> Arg:
    return Arg(name, _choice(options), default)


def pair(name: str, default: Any = _REQUIRED) -> Arg:
    return Arg(name, PAIR, default)


DTYPE = choice("dtype", DTYPES, "float32")
SHAPE = Arg("shape", SHAPE_KIND)
WINDOW = (pair("kernel"), pair("stride", 1), Arg("padding", PADDING, 0))


def register(name: str, *args: Arg) -> Callable[[Callable[..., list[Tensor]]], Any]:
    """Declare op ``name`` with ``args``; the decorated builder receives them by name."""

    def decorate(build: Callable[..., list[Tensor]]) -> Callable[..., list[Tensor]]:
        if name in OPS:
            raise ValueError(f"workload op {name!r} is registered twice")
        OPS[name] = OpSpec(name, args, build)
        return build

    return decorate


# ---- the ops ----------------------------------------------------------------------------


def _placeholder(shape: Any, dtype: str, name: str) -> Tensor:
    return te.placeholder(tuple(shape), dtype, name=name)


@register("matmul", dim("m"), dim("n"), dim("k"), flag("transpose_a"), flag("transpose_b"), DTYPE)
def _matmul(
    m: int, n: int, k: int, transpose_a: bool, transpose_b: bool, dtype: str
) -> list[Tensor]:
    a = _placeholder((k, m) if transpose_a else (m, k), dtype, "A")
    b = _placeholder((n, k) if transpose_b else (k, n), dtype, "B")
    return [a, b, topi.matmul(a, b, transpose_a, transpose_b)]


@register("batch_matmul", dim("batch"), dim("m"), dim("n"), dim("k"), DTYPE)
def _batch_matmul(batch: int, m: int, n: int, k: int, dtype: str) -> list[Tensor]:
    a = _placeholder((batch, m, k), dtype, "A")
    b = _placeholder((batch, k, n), dtype, "B")
    return [a, b, topi.batch_matmul(a, b)]


_ACTIVATION = ("none", "relu", "gelu", "sigmoid")
_IMAGE = (dim("batch"), dim("channels"), dim("height"), dim("width"))


@register(
    "dense",
    dim("batch"),
    dim("in_features"),
    dim("out_features"),
    flag("bias", True),
    choice("activation", _ACTIVATION, "none"),
    DTYPE,
)
def _dense(
    batch: int, in_features: int, out_features: int, bias: bool, activation: str, dtype: str
) -> list[Tensor]:
    x = _placeholder((batch, in_features), dtype, "X")
    w = _placeholder((out_features, in_features), dtype, "W")
    b = _placeholder((out_features,), dtype, "bias") if bias else None
    out = topi.dense(x, w, b, None if activation == "none" else activation)
    return [x, w, *([b] if b is not None else []), out]


_CONV = (
    dim("batch"),
    dim("in_channels"),
    dim("height"),
    dim("width"),
    dim("out_channels"),
    *WINDOW,
    pair("dilation", 1),
    dim("groups", 1),
    DTYPE,
)


def _as_pair(value: int | list[int]) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (value[0], value[1])


@register("conv2d_nchw", *_CONV)
def _conv2d_nchw(**args: Any) -> list[Tensor]:
    data, kernel = _conv_inputs("NCHW", args)
    out = topi.conv2d_nchw(data, kernel, *_window_args(args), args["groups"])
    return [data, kernel, out]


@register("conv2d_nhwc", *_CONV)
def _conv2d_nhwc(**args: Any) -> list[Tensor]:
    data, kernel = _conv_inputs("NHWC", args)
    out = topi.conv2d_nhwc(data, kernel, *_window_args(args), args["groups"])
    return [data, kernel, out]


@register("conv2d_nchw_bias_relu", *_CONV)
def _conv2d_nchw_bias_relu(**args: Any) -> list[Tensor]:
    data, kernel = _conv_inputs("NCHW", args)
    bias = _placeholder((args["out_channels"],), args["dtype"], "bias")
    out = topi.conv2d_nchw_bias_relu(data, kernel, bias, *_window_args(args), args["groups"])
    return [data, kernel, bias, out]


@register(
    "conv2d_winograd_nchw",
    dim("batch"),
    dim("in_channels"),
    dim("height"),
    dim("width"),
    dim("out_channels"),
    Arg("padding", PADDING, 0),
    dim("tile_size", 2),
    DTYPE,
)
def _conv2d_winograd_nchw(**args: Any) -> list[Tensor]:
    """A 3x3 stride-1 conv2d_nchw computed by Winograd's F(tile_size, 3)."""
    data, kernel = _conv_inputs("NCHW", {**args, "kernel": 3, "groups": 1})
    out = topi.nn.conv2d_winograd_nchw(data, kernel, args["padding"], args["tile_size"])
    return [data, kernel, out]


def _conv_inputs(layout: str, args: dict[str, Any]) -> tuple[Tensor, Tensor]:
    kh, kw = _as_pair(args["kernel"])
    n, c, h, w, o = (args[k] for k in ("batch", "in_channels", "height", "width", "out_channels"))
    groups = args["groups"]
    for field, channels in (("in_channels", c), ("out_channels", o)):
        if channels % groups:
            raise WorkloadError(f"args.groups: {field} {channels} not divisible by groups {groups}")
    per_group = c // groups
    if layout == "NCHW":
        return (
            _placeholder((n, c, h, w), args["dtype"], "data"),
            _placeholder((o, per_group, kh, kw), args["dtype"], "kernel"),
        )
    return (
        _placeholder((n, h, w, c), args["dtype"], "data"),
        _placeholder((kh, kw, per_group, o), args["dtype"], "kernel"),
    )


def _window_args(args: dict[str, Any]) -> tuple[Any, Any, Any]:
    return args["stride"], args["padding"], args["dilation"]


@register(
    "depthwise_conv2d_nchw",
    *_IMAGE,
    *WINDOW,
    pair("dilation", 1),
    dim("multiplier", 1),
    DTYPE,
)
def _depthwise_conv2d_nchw(**args: Any) -> list[Tensor]:
    kh, kw = _as_pair(args["kernel"])
    n, c, h, w = (args[k] for k in ("batch", "channels", "height", "width"))
    data = _placeholder((n, c, h, w), args["dtype"], "data")
    kernel = _placeholder((c, args["multiplier"], kh, kw), args["dtype"], "kernel")
    return [data, kernel, topi.depthwise_conv2d_nchw(data, kernel, *_window_args(args))]


@register("max_pool2d", *_IMAGE, *WINDOW, DTYPE)
def _max_pool2d(**args: Any) -> list[Tensor]:
    data = _pool_input(args)
    return [data, topi.max_pool2d(data, args["kernel"], args["stride"], args["padding"])]


@register("avg_pool2d", *_IMAGE, *WINDOW, flag("count_include_pad"), DTYPE)
def _avg_pool2d(**args: Any) -> list[Tensor]:
    data = _pool_input(args)
    out = topi.avg_pool2d(
        data, args["kernel"], args["stride"], args["padding"], args["count_include_pad"]
    )
    return [data, out]


@register("global_avg_pool2d", *_IMAGE, DTYPE)
def _global_avg_pool2d(**args: Any) -> list[Tensor]:
    data = _pool_input(args)
    return [data, topi.global_avg_pool2d(data)]


def _pool_input(args: dict[str, Any]) -> Tensor:
    shape = tuple(args[k] for k in ("batch", "channels", "height", "width"))
    return _placeholder(shape, args["dtype"], "data")


def _register_axis_op(name: str, operator: Callable[[Tensor, int], Tensor]) -> None:
    def build(shape: list[int], axis: int, dtype: str) -> list[Tensor]:
        x = _placeholder(shape, dtype, "X")
        return [x, operator(x, axis)]

    register(name, SHAPE, Arg("axis", AXIS, -1), DTYPE)(build)


_register_axis_op("softmax", topi.softmax)
_register_axis_op("log_softmax", topi.log_softmax)


@register("layer_norm", SHAPE, Arg("axis", AXES, -1), Arg("epsilon", NUMBER, 1e-5), DTYPE)
def _layer_norm(shape: list[int], axis: Any, epsilon: float, dtype: str) -> list[Tensor]:
    x = _placeholder(shape, dtype, "X")
    axes = normalize_axes("layer_norm", "axis", axis, len(shape))
    normalized = [shape[a] for a in axes]
    gamma = _placeholder(normalized, dtype, "gamma")
    beta = _placeholder(normalized, dtype, "beta")
    return [x, gamma, beta, topi.layer_norm(x, gamma, beta, axis, epsilon)]


def _register_unary(name: str, operator: Callable[[Tensor], Tensor]) -> None:
    def build(shape: list[int], dtype: str) -> list[Tensor]:
        x = _placeholder(shape, dtype, "X")
        return [x, operator(x)]

    register(name, SHAPE, DTYPE)(build)


def _register_binary(name: str, operator: Callable[[Tensor, Tensor], Tensor]) -> None:
    def build(shape_a: list[int], shape_b: list[int], dtype: str) -> list[Tensor]:
        a = _placeholder(shape_a, dtype, "A")
        b = _placeholder(shape_b, dtype, "B")
        return [a, b, operator(a, b)]

    register(name, Arg("shape_a", SHAPE_KIND), Arg("shape_b", SHAPE_KIND), DTYPE)(build)


def _register_reduction(name: str, operator: Callable[..., Tensor]) -> None:
    def build(shape: list[int], axis: Any, keepdims: bool, dtype: str) -> list[Tensor]:
        x = _placeholder(shape, dtype, "X")
        return [x, operator(x, axis, keepdims)]

    register(name, SHAPE, Arg("axis", AXES, None), flag("keepdims"), DTYPE)(build)


for _name in ("relu", "gelu", "sigmoid", "exp", "log", "sqrt", "tanh", "abs", "negative"):
    _register_unary(_name, getattr(topi, _name))
for _name in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power"):
    _register_binary(_name, getattr(topi, _name))
for _name in ("sum", "max", "min", "mean"):
    _register_reduction(_name, getattr(topi, _name))


@register("transpose", SHAPE, Arg("axes", PERMUTATION, None), DTYPE)
def _transpose(shape: list[int], axes: Any, dtype: str) -> list[Tensor]:
    x = _placeholder(shape, dtype, "X")
    return [x, topi.transpose(x, axes)]


@register("reshape", SHAPE, Arg("newshape", NEWSHAPE), DTYPE)
def _reshape(shape: list[int], newshape: list[int], dtype: str) -> list[Tensor]:
    x = _placeholder(shape, dtype, "X")
    return [x, topi.reshape(x, newshape)]


@register(
    "pad",
    SHAPE,
    Arg("pad_before", WIDTHS),
    Arg("pad_after", WIDTHS),
    Arg("pad_value", NUMBER, 0.0),
    DTYPE,
)
def _pad(
    shape: list[int], pad_before: list[int], pad_after: list[int], pad_value: float, dtype: str
) -> list[Tensor]:
    x = _placeholder(shape, dtype, "X")
    return [x, topi.pad(x, pad_before, pad_after, pad_value)]


@register(
    "concatenate",
    Arg("shapes", SHAPES),
    Arg("axis", AXIS, 0),
    DTYPE,
)
def _concatenate(shapes: list[list[int]], axis: int, dtype: str) -> list[Tensor]:
    inputs = [_placeholder(s, dtype, f"X{k}") for k, s in enumerate(shapes)]
    return [*inputs, topi.concatenate(inputs, axis)]
