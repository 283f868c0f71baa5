"""Whole models: a graph IR (``ir``), its operators (``ops``), the ONNX frontend
(``onnx_import``), passes (``passes``), fusion into functions (``fuse``) and the
executor that builds and runs them (``executor``)."""

from compiler.graph.executor import GraphModule, optimize
from compiler.graph.fuse import FusedGroup, fuse
from compiler.graph.ir import Graph, GraphError, Node, TensorType
from compiler.graph.onnx_import import UnsupportedOperatorError, import_onnx

__all__ = [
    "FusedGroup",
    "Graph",
    "GraphError",
    "GraphModule",
    "Node",
    "TensorType",
    "UnsupportedOperatorError",
    "fuse",
    "import_onnx",
    "optimize",
]
