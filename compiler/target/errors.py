"""The error of a target string that cannot be read."""

from compiler.errors import CompilerError


class TargetError(CompilerError, ValueError):
    """A target string that cannot be parsed."""
