"""The command line is a layer on top of the tuner: no module of ``tuner`` outside
``tuner/cli`` imports ``tuner.cli``, at its top or inside a function, by any spelling
(``import tuner.cli.main``, ``from tuner.cli import ...``, ``from tuner import cli``,
or a relative import that resolves to it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYER = "tuner.cli"


def _package_of(path: Path, root: Path) -> str:
    """The package that a relative import in ``path`` (a file under ``root``) starts
    from."""
    return ".".join(path.relative_to(root).parent.parts)


def _imported(path: Path, root: Path) -> set[str]:
    """Every module name an import in ``path`` can bind, relative ones resolved;
    ``from A import B`` counts as both ``A`` and ``A.B``, since B may be a module."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _package_of(path, root).split(".")
            if node.level:
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _in_layer(name: str) -> bool:
    return name == LAYER or name.startswith(LAYER + ".")


def _offenders(root: Path) -> dict[str, list[str]]:
    """The modules of ``root/tuner`` outside ``root/tuner/cli`` that import the command
    line, with what they import of it."""
    found = {}
    for path in sorted((root / "tuner").rglob("*.py")):
        if (root / "tuner" / "cli") in path.parents:
            continue
        layer = sorted(name for name in _imported(path, root) if _in_layer(name))
        if layer:
            found[path.relative_to(root).as_posix()] = layer
    return found


def test_no_module_of_the_tuner_imports_the_command_line() -> None:
    assert (ROOT / "tuner" / "cli" / "main.py").is_file()
    assert _offenders(ROOT) == {}


def test_every_spelling_of_an_import_of_the_command_line_is_caught(tmp_path: Path) -> None:
    """The check itself, on a scratch package: each spelling is found, and a module
    of the same package that imports only the tuner is not."""
    package = tmp_path / "tuner"
    (package / "cli").mkdir(parents=True)
    (package / "search").mkdir()
    sources = {
        "plain.py": "import tuner.cli.main\n",
        "from_package.py": "from tuner import cli\n",
        "from_module.py": "from tuner.cli.errors import UsageError\n",
        "relative.py": "from . import cli\n",
        "search/relative_up.py": "from ..cli import tables\n",
        "deferred.py": "def run():\n    from tuner.cli.commands import run\n    return run\n",
        "fine.py": "from tuner import client, tune\nimport tuner.client\n",
    }
    for name, source in sources.items():
        (package / name).write_text(source)
    (package / "cli" / "main.py").write_text("from tuner.cli import commands\n")

    expected = {f"tuner/{name}" for name in sources if name != "fine.py"}
    assert set(_offenders(tmp_path)) == expected
