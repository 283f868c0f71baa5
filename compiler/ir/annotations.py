"""Block annotations that one folder writes and a higher one reads, named here, below
both: an operator (``compiler.topi``) states what the workload's analyses
(``compiler.workload``) would otherwise count."""

# The floating-point operations a block counts per element it writes
# (``compiler.workload.flops``).
FLOPS_ATTR = "flops_per_instance"
