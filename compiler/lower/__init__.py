"""Lowering: scheduled block IR to flat loops that code generation consumes."""

from compiler.lower.pipeline import PASS_NAMES, PASSES, Pass, lower, lower_func, to_ir_module

__all__ = ["PASSES", "PASS_NAMES", "Pass", "lower", "lower_func", "to_ir_module"]
