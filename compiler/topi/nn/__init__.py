"""Neural-network operators, under TVM's ``topi.nn`` names."""

from compiler.topi.elemwise import gelu, relu
from compiler.topi.nn.conv2d import (
    conv2d_nchw,
    conv2d_nchw_bias_relu,
    conv2d_nchwc,
    conv2d_nhwc,
    depthwise_conv2d_nchw,
    depthwise_conv2d_nchwc,
)
from compiler.topi.nn.dense import batch_matmul, dense, matmul
from compiler.topi.nn.layer_norm import layer_norm
from compiler.topi.nn.pad import pad
from compiler.topi.nn.pooling import avg_pool2d, global_avg_pool2d, max_pool2d
from compiler.topi.nn.softmax import log_softmax, softmax
from compiler.topi.nn.winograd import conv2d_winograd_nchw, conv2d_winograd_nchwc

__all__ = [
    "avg_pool2d",
    "batch_matmul",
    "conv2d_nchw",
    "conv2d_nchw_bias_relu",
    "conv2d_nchwc",
    "conv2d_nhwc",
    "conv2d_winograd_nchw",
    "conv2d_winograd_nchwc",
    "dense",
    "depthwise_conv2d_nchw",
    "depthwise_conv2d_nchwc",
    "gelu",
    "global_avg_pool2d",
    "layer_norm",
    "log_softmax",
    "matmul",
    "max_pool2d",
    "pad",
    "relu",
    "softmax",
]
