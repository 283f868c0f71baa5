"""Measurement settings for tuning tests: few, short repeats and no warm-up, since
the tests check what is stored and replayed, never how fast anything runs."""

from workers import MeasureConfig

QUICK = MeasureConfig(repeat=2, min_repeat_ms=0.5, warmup=0)
