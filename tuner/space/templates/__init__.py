"""The registered templates; importing this package registers them."""

from tuner.space.templates import conv2d, gemm, gpu_conv2d, gpu_gemm

__all__ = ["conv2d", "gemm", "gpu_conv2d", "gpu_gemm"]
