"""The operator library: tensor-expression definitions of common operators.

Names follow TVM's topi: elementwise, broadcast, reduction and layout operators
live here (``topi.exp``, ``topi.add``, ``topi.sum``, ``topi.transpose``), the
neural-network ones in ``topi.nn`` (``topi.nn.conv2d_nchw``, ``topi.nn.softmax``)
and, for convenience, here too. Every operator returns a ``te.Tensor``; build a
kernel with ``te.create_prim_func([inputs..., output])``. Bad arguments raise
``OperatorError`` naming the operator and the argument.
"""

from compiler.topi import nn
from compiler.topi.broadcast import add, divide, maximum, minimum, multiply, power, subtract
from compiler.topi.elemwise import abs, exp, gelu, log, negative, relu, sigmoid, sqrt, tanh
from compiler.topi.errors import OperatorError
from compiler.topi.nn import (
    avg_pool2d,
    batch_matmul,
    conv2d_nchw,
    conv2d_nchw_bias_relu,
    conv2d_nchwc,
    conv2d_nhwc,
    conv2d_winograd_nchw,
    conv2d_winograd_nchwc,
    dense,
    depthwise_conv2d_nchw,
    depthwise_conv2d_nchwc,
    global_avg_pool2d,
    layer_norm,
    log_softmax,
    matmul,
    max_pool2d,
    pad,
    softmax,
)
from compiler.topi.reduction import max, mean, min, sum
from compiler.topi.transform import concatenate, layout_transform, reshape, transpose

__all__ = [
    "OperatorError",
    "abs",
    "add",
    "avg_pool2d",
    "batch_matmul",
    "concatenate",
    "conv2d_nchw",
    "conv2d_nchw_bias_relu",
    "conv2d_nchwc",
    "conv2d_nhwc",
    "conv2d_winograd_nchw",
    "conv2d_winograd_nchwc",
    "dense",
    "depthwise_conv2d_nchw",
    "depthwise_conv2d_nchwc",
    "divide",
    "exp",
    "gelu",
    "global_avg_pool2d",
    "layer_norm",
    "layout_transform",
    "log",
    "log_softmax",
    "matmul",
    "max",
    "max_pool2d",
    "maximum",
    "mean",
    "min",
    "minimum",
    "multiply",
    "negative",
    "nn",
    "pad",
    "power",
    "relu",
    "reshape",
    "sigmoid",
    "softmax",
    "sqrt",
    "subtract",
    "sum",
    "tanh",
    "transpose",
]
