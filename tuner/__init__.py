"""The search coordinator: spaces, search strategies, the cost model and the tuning
loop. ``tuner.tune_tir(func, space=f, trials=...)`` tunes one workload from Python.
The ``tensortune`` command line is the package ``tuner.cli``; no other module of
``tuner`` imports it.

``tune_tir`` is imported on first use: importing LLVM, XGBoost and SQLAlchemy takes a
second or more, which ``tensortune`` (``tuner.cli.main``) defers until its ``main`` runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.tune_function import tune_tir


def __getattr__(name: str) -> Any:
    if name == "tune_tir":
        from tuner.tune_function import tune_tir  # start-up time: see above

        return tune_tir
    raise AttributeError(f"module 'tuner' has no attribute {name!r}")


__all__ = ["tune_tir"]
