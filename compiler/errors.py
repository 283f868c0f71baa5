"""What goes wrong, named once for every package: the root of the compiler's
exceptions, and the kinds of failure a measured candidate ends with.

``ErrorKind`` lives here, in the package every other one may depend on, so that
workers make a failure, the tuner reads it and the database stores it with one
enum and no translation table. Its values are the words the database stores.
"""

from __future__ import annotations

import enum


class CompilerError(Exception):
    """The root of every exception the compiler raises on purpose. Each subclass keeps
    the builtin base it had (``ScheduleError`` is still a ``ValueError``), so code that
    catches the builtin keeps working, and ``except CompilerError`` catches them all."""


class MissingExtraError(CompilerError, ImportError):
    """A part of tensortune whose packages are optional and not installed here; ``extra``
    names the extra of the ``tensortune`` distribution that installs them."""

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(
            f"{what} needs tensortune's {extra!r} extra, which is not installed: "
            f"pip install 'tensortune[{extra}]' (in a checkout: uv sync --locked --extra {extra})"
        )
        self.extra = extra


class ErrorKind(enum.Enum):
    """How a measured candidate failed. A failure is a kind and a message, never a
    made-up large time; a success has no kind."""

    BUILD_ERROR = "build_error"  # the trace did not replay, lower or compile
    RUN_ERROR = "run_error"  # the kernel raised, or its inputs could not be made
    TIMEOUT = "timeout"  # building or running passed its deadline
    WRONG_RESULT = "wrong_result"  # the outputs differ from the reference
    CRASHED = "crashed"  # the process building or running it died
    INTERNAL = "internal"  # tensortune itself failed around the candidate: a bug
    # The host building or running it was lost, or none of its kind came: no fault of
    # the candidate's, so a resumed search measures it again.
    HOST_LOST = "host_lost"
