"""The one error a schedule primitive raises for an illegal use."""

from compiler.errors import CompilerError


class ScheduleError(CompilerError, ValueError):
    """An illegal schedule move; the message names the block or loop and the reason.

    A primitive that raises it leaves the schedule exactly as it was, so search code
    can catch it, discard the move and go on.
    """
