"""Cost models that rank configs before they are measured.

``create("xgb", **options)`` gives an ``XGBCostModel`` (scikit-learn's contract:
``fit`` returns self, ``predict``, ``save``/``load``); ``tuner.cost_model.features``
turns configs into the rows it reads.
"""

from __future__ import annotations

from typing import Any

from tuner.cost_model import features
from tuner.cost_model.base import CostModel, CostModelError


def _xgb(**options: Any) -> CostModel:
    from tuner.cost_model.xgb import XGBCostModel  # XGBoost loads only when asked for

    return XGBCostModel(**options)


KINDS = {"xgb": _xgb}


def create(kind: str, **options: Any) -> CostModel:
    """The cost model of kind ``kind`` (one of ``KINDS``) with ``options``."""
    if kind not in KINDS:
        raise CostModelError(f"unknown cost model kind {kind!r}; the kinds are {sorted(KINDS)}")
    return KINDS[kind](**options)


__all__ = ["KINDS", "CostModel", "CostModelError", "create", "features"]
