"""The one error the operator library raises for arguments it cannot compute."""

from compiler.errors import CompilerError


class OperatorError(CompilerError, ValueError):
    """An operator called with inputs it cannot compute.

    The message starts with the operator's name and names the offending argument,
    e.g. ``conv2d_nchw: channels 3 not divisible by groups 2``.
    """
