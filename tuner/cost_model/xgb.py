"""Gradient-boosted trees (XGBoost) as a cost model.

Two objectives: ``regression`` fits ``y`` by squared error (the model-based search
gives it log throughput, so a factor of two costs the same everywhere), and
``rank`` learns only the order of the rows (pairwise), which is all a search
needs and is indifferent to the scale of ``y``, so records of workloads of
different speeds mix.

The trees are trained on one thread by default: the model retrains between
measurement batches, on a few hundred rows, and an OpenMP team left spinning
would disturb the timing of the next batch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xgboost

from tuner.cost_model.base import CostModel, CostModelError

OBJECTIVES = {"regression": "reg:squarederror", "rank": "rank:pairwise"}
FORMAT = "tensortune.xgb_cost_model.v1"
# Pairs drawn over all rows, not only around the top few (XGBoost's default for
# ranking), which is what ordering configs by speed needs.
RANK_PAIRS = {"lambdarank_pair_method": "mean", "lambdarank_num_pair_per_sample": 8}


class XGBCostModel(CostModel):
    def __init__(
        self,
        *,
        objective: str = "regression",
        n_estimators: int = 100,
        max_depth: int = 6,
        learning_rate: float = 0.2,
        min_child_weight: float = 1.0,
        subsample: float = 1.0,
        colsample_bytree: float = 1.0,
        random_state: int = 0,
        n_jobs: int = 1,
    ) -> None:
        self.objective = objective
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.random_state = random_state
        self.n_jobs = n_jobs

    def get_params(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "n_estimators": self.n_estimators,
            "max_depth": self.max_depth,
            "learning_rate": self.learning_rate,
            "min_child_weight": self.min_child_weight,
            "subsample": self.subsample,
            "colsample_bytree": self.colsample_bytree,
            "random_state": self.random_state,
            "n_jobs": self.n_jobs,
        }

    def fit(self, X: np.ndarray, y: np.ndarray) -> XGBCostModel:
        X = _rows(X, "X")
        y = np.asarray(y, dtype=float).reshape(-1)
        if len(y) != len(X) or len(X) == 0:
            raise CostModelError(f"fit needs rows and as many targets; got {len(X)} and {len(y)}")
        if not np.all(np.isfinite(y)):
            raise CostModelError("fit targets must be finite; give failures a low finite value")
        if self.objective not in OBJECTIVES:
            raise CostModelError(f"objective {self.objective!r} is not one of {sorted(OBJECTIVES)}")
        data = xgboost.DMatrix(X, label=y)
        params = {
            "objective": OBJECTIVES[self.objective],
            "max_depth": self.max_depth,
            "eta": self.learning_rate,
            "min_child_weight": self.min_child_weight,
            "subsample": self.subsample,
            "colsample_bytree": self.colsample_bytree,
            "seed": self.random_state,
            "nthread": self.n_jobs,
            "verbosity": 0,
        }
        if self.objective == "rank":
            data.set_group([len(y)])
            params.update(RANK_PAIRS)
        self.booster_ = xgboost.train(params, data, num_boost_round=self.n_estimators)
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        booster = getattr(self, "booster_", None)
        if booster is None:
            raise CostModelError("this XGBCostModel is not fitted; call fit(X, y) first")
        X = _rows(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise CostModelError(
                f"X has {X.shape[1]} features per row, the model was fitted on "
                f"{self.n_features_in_}"
            )
        return np.asarray(booster.inplace_predict(X), dtype=float)

    def save(self, path: str | Path) -> None:
        booster = getattr(self, "booster_", None)
        if booster is None:
            raise CostModelError("cannot save an XGBCostModel that is not fitted")
        document = {
            "format": FORMAT,
            "params": self.get_params(),
            "n_features_in": self.n_features_in_,
            "booster": json.loads(bytes(booster.save_raw("json")).decode()),
        }
        Path(path).write_text(json.dumps(document))

    @classmethod
    def load(cls, path: str | Path) -> XGBCostModel:
        try:
            document = json.loads(Path(path).read_text())
        except (OSError, ValueError) as err:
            raise CostModelError(f"cannot read a saved model from {path}: {err}") from None
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise CostModelError(f"{path} is not a model saved by XGBCostModel.save ({FORMAT})")
        model = cls(**document["params"])
        booster = xgboost.Booster()
        booster.load_model(bytearray(json.dumps(document["booster"]).encode()))
        model.booster_ = booster
        model.n_features_in_ = int(document["n_features_in"])
        return model


def _rows(X: np.ndarray, name: str) -> np.ndarray:
    rows = np.asarray(X, dtype=float)
    if rows.ndim != 2:
        raise CostModelError(f"{name} must be a 2-D array of rows, got shape {rows.shape}")
    return rows
