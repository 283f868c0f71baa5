"""The registered templates; importing this package registers them."""

from tuner.space.templates import conv2d, gemm

__all__ = ["conv2d", "gemm"]
