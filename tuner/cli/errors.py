"""The command line's one error of its own: input that names no valid workload, target
or option. ``tuner.cli.commands.EXIT_CODES`` turns it into exit code 2."""

from __future__ import annotations


class UsageError(ValueError):
    """The command line does not name a valid workload, target or option."""
