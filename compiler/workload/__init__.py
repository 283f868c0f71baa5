"""Workloads as data: an operator spec and the PrimFunc it builds (``spec``), the
canonical JSON and key a database stores it under (``key``), and its flop count
(``flops``)."""
