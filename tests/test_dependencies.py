"""What the packages import against what the distribution declares: a module imported
at the top of a module must come from a runtime dependency (a bare install has nothing
else), and one imported inside a function from a runtime dependency or an extra
(``cuda``). A fresh install proves the same end to end (scripts/check_fresh_install.sh,
run by .ci/run); this test names the import and the file."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compiler", "tuner", "workers", "db")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# The extras code may import from, inside a function, where it names the extra when the
# import fails; the others (test, bench, kuberay) are for tests, benchmarks and images.
IMPORTABLE_EXTRAS = ("cuda",)


def _name(requirement: str) -> str:
    """The normalized distribution name of a requirement (PEP 503)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match[0]).lower()


RUNTIME = {_name(r) for r in PROJECT["dependencies"]}
OPTIONAL = {
    _name(r) for extra in IMPORTABLE_EXTRAS for r in PROJECT["optional-dependencies"][extra]
}
DISTRIBUTIONS = {
    module: {_name(d) for d in names}
    for module, names in importlib.metadata.packages_distributions().items()
}


def _imports(tree: ast.Module) -> Iterator[tuple[str, int, bool]]:
    """(top-level module, line, at module scope) of every absolute import."""
    scoped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            scoped |= {id(inner) for inner in ast.walk(node) if inner is not node}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            yield name.split(".")[0], node.lineno, id(node) not in scoped


def _third_party_imports() -> Iterator[tuple[str, str, bool]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for module, line, top in _imports(ast.parse(path.read_text())):
                if module not in sys.stdlib_module_names and module not in PACKAGES:
                    yield module, f"{path.relative_to(ROOT)}:{line}", top


def test_every_import_comes_from_a_declared_dependency() -> None:
    undeclared = []
    for module, where, top in _third_party_imports():
        allowed = RUNTIME if top else RUNTIME | OPTIONAL
        if not DISTRIBUTIONS.get(module, set()) & allowed:
            undeclared.append(f"{where} imports {module} ({DISTRIBUTIONS.get(module)})")
    assert not undeclared, "\n".join(undeclared)


def test_the_check_sees_the_packages_third_party_imports() -> None:
    found = {module for module, _, _ in _third_party_imports()}
    assert {"numpy", "llvmlite", "httpx", "fastapi", "ray", "cuda"} <= found
