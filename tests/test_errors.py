"""One error taxonomy: the compiler's exceptions share a root, no class shadows a
builtin, and no production function carries a fault switch; and the borders between
packages: the workers never import ``db``, and ``db`` sees the compiler through one
module."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
from pathlib import Path

import compiler
from compiler.errors import CompilerError

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("compiler", "tuner", "workers", "db")


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names.add(node.module)
    return names


def test_no_module_of_workers_imports_db() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(n for n in _imported(path) if n.split(".")[0] == "db")
        for path in _modules("workers")
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_db_imports_the_compiler_only_through_its_border_module() -> None:
    border = ROOT / "db" / "compiler_border.py"
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            n for n in _imported(path) if n.split(".")[0] == "compiler"
        )
        for path in _modules("db")
        if path != border
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_no_production_function_takes_a_fault_switch() -> None:
    for package in PACKAGES:
        for path in _modules(package):
            tree = ast.parse(path.read_text())
            assert not any("faults" in name.split(".") for name in _imported(path)), path
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    names = [a.arg for a in (*node.args.args, *node.args.kwonlyargs)]
                    assert "faults" not in names, f"{path}: {node.name}"


def test_no_class_shadows_a_builtin() -> None:
    shadowing = [
        f"{path.relative_to(ROOT)}: {node.name}"
        for package in PACKAGES
        for path in _modules(package)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and hasattr(builtins, node.name)
    ]
    assert shadowing == []


def test_every_compiler_exception_is_a_compiler_error() -> None:
    found = []
    for info in pkgutil.walk_packages(compiler.__path__, "compiler."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == module.__name__:
                found.append(cls)
    assert found and all(issubclass(cls, CompilerError) for cls in found), [
        cls for cls in found if not issubclass(cls, CompilerError)
    ]
    assert issubclass(compiler.ScheduleError, ValueError)  # the builtin base stays
