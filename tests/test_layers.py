"""The folders of ``compiler`` and of ``tuner`` depend on each other one way.

Each package is one ordered list of layers, bottom to top: a folder, a module at the
package's top (``compiler/build.py``), or a group of such modules that sit at one
height. A module may import its own layer and the layers below it, never one above,
whether at its top or inside a function, by any spelling (``import compiler.lower.x``,
``from compiler import lower``, ``from compiler.lower import x``, or a relative import
that resolves there). Data that two layers share moves down to a module below both.

An import inside a function of a module of the same package is a circle being dodged
unless it has another reason; the few that do are listed, with it, in ``DEFERRED``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

Layer = str | tuple[str, ...]

COMPILER: tuple[Layer, ...] = (
    "errors",
    "ir",
    "arith",
    "target",
    "abi",
    "schedule",
    "te",
    "topi",
    "workload",
    "lower",
    "tuned",
    "codegen",
    "runtime",
    "cuda_build",
    "build",
    "graph",
    "__init__",
)
TUNER: tuple[Layer, ...] = (
    "space",
    "cost_model",
    "search",
    "scheduler",
    # The tuning loop and the modules around it; they import each other one way too,
    # which Python's imports already insist on, so they share one height.
    (
        "__init__",
        "client",
        "failures",
        "measurement",
        "model_retime",
        "model_tasks",
        "model_tune",
        "progress",
        "space_choice",
        "task",
        "transfer",
        "tune",
        "tune_function",
    ),
    "service",
    "cli",
)

# (module, what it imports inside a function): why the import waits for the call.
DEFERRED = {
    ("tuner/cli/main.py", "tuner.cli.commands"): (
        "start-up: a Ctrl-C while LLVM, XGBoost and SQLAlchemy load (a second or more) "
        "ends in main's one line, not a traceback from the import machinery"
    ),
    ("tuner/__init__.py", "tuner.tune_function"): (
        "start-up time: `import tuner` (and so `tensortune`) loads the tuning loop on first use"
    ),
    ("tuner/cost_model/__init__.py", "tuner.cost_model.xgb"): (
        "import time: XGBoost loads only when an XGBoost model is asked for"
    ),
}


@dataclass(frozen=True)
class Import:
    """One module that one import statement of ``path`` binds."""

    path: str
    line: int
    module: str
    deferred: bool


def _package_of(path: Path, root: Path) -> list[str]:
    """The package that a relative import in ``path`` (a file under ``root``) starts
    from."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts if parts[-1] == "__init__" else parts[:-1]


def _is_module(name: str, root: Path) -> bool:
    where = root.joinpath(*name.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def _function_scoped(tree: ast.Module) -> set[int]:
    scoped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            scoped |= {id(inner) for inner in ast.walk(node) if inner is not node}
    return scoped


def imports(path: Path, root: Path) -> Iterator[Import]:
    """Every module an import in ``path`` binds, relative ones resolved; ``from A
    import B`` is an import of ``A.B`` where that is a module, else of ``A``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    scoped = _function_scoped(tree)
    where = path.relative_to(root).as_posix()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module.split(".") if node.module else []
            if node.level:
                package = _package_of(path, root)
                base = package[: len(package) - (node.level - 1)] + base
            module = ".".join(base)
            names = [
                f"{module}.{alias.name}" if _is_module(f"{module}.{alias.name}", root) else module
                for alias in node.names
            ]
        else:
            continue
        for name in dict.fromkeys(names):
            yield Import(where, node.lineno, name, id(node) in scoped)


def _layer_of(module: str, package: str) -> str:
    """The folder or top-level module of ``package`` that ``module`` lies in;
    ``__init__`` for the package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _heights(layers: Sequence[Layer]) -> dict[str, int]:
    return {
        name: height
        for height, layer in enumerate(layers)
        for name in ((layer,) if isinstance(layer, str) else layer)
    }


def _package_imports(package: str, root: Path) -> Iterator[tuple[str, Import]]:
    """(layer of the importing module, import) for every import of ``package`` by one
    of its own modules."""
    for path in sorted((root / package).rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        layer = _layer_of(module, package)
        for found in imports(path, root):
            if found.module == package or found.module.startswith(package + "."):
                yield layer, found


def unlisted_layers(package: str, layers: Sequence[Layer], root: Path) -> set[str]:
    """The folders and top-level modules of ``package`` that ``layers`` does not place."""
    present = {
        path.stem if path.is_file() else path.name
        for path in (root / package).iterdir()
        if (path.suffix == ".py") or (path / "__init__.py").is_file()
    }
    return present - set(_heights(layers))


def upward_imports(package: str, layers: Sequence[Layer], root: Path) -> list[str]:
    """Each import by a module of ``package`` of a layer above its own."""
    heights = _heights(layers)
    found = []
    for layer, imported in _package_imports(package, root):
        target = _layer_of(imported.module, package)
        if heights.get(target, -1) > heights.get(layer, -1):
            found.append(f"{imported.path}:{imported.line} ({layer}) imports {imported.module}")
    return found


def deferred_imports(
    package: str, root: Path, allowed: dict[tuple[str, str], str] | None = None
) -> list[str]:
    """Each import inside a function of a module of ``package`` of another module of
    ``package``, except those in ``allowed``."""
    allowed = DEFERRED if allowed is None else allowed
    return [
        f"{imported.path}:{imported.line} imports {imported.module} inside a function"
        for _, imported in _package_imports(package, root)
        if imported.deferred and (imported.path, imported.module) not in allowed
    ]


def test_every_folder_of_the_compiler_and_the_tuner_has_a_place_in_its_list() -> None:
    assert unlisted_layers("compiler", COMPILER, ROOT) == set()
    assert unlisted_layers("tuner", TUNER, ROOT) == set()


def test_no_folder_of_the_compiler_imports_a_folder_above_it() -> None:
    assert upward_imports("compiler", COMPILER, ROOT) == []


def test_no_folder_of_the_tuner_imports_a_folder_above_it() -> None:
    """The command line is the top: no other module of the tuner imports it."""
    assert upward_imports("tuner", TUNER, ROOT) == []


def test_no_module_defers_an_import_of_its_own_package_without_a_reason() -> None:
    assert deferred_imports("compiler", ROOT) == []
    assert deferred_imports("tuner", ROOT) == []


def test_every_allowed_deferred_import_is_still_there() -> None:
    present = {
        (imported.path, imported.module)
        for package in ("compiler", "tuner")
        for _, imported in _package_imports(package, ROOT)
        if imported.deferred
    }
    assert set(DEFERRED) <= present


def test_every_spelling_of_an_upward_or_deferred_import_is_caught(tmp_path: Path) -> None:
    """The checks themselves, on a scratch package: each spelling of an import of a
    higher layer is found, at the top of a module or inside a function; an import of
    the same or a lower layer is not; a deferred import is found unless allowed."""
    package = tmp_path / "pkg"
    for folder in ("low", "high"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
        (package / folder / "x.py").write_text("")
    (package / "__init__.py").write_text("from pkg.high import x\n")
    sources = {
        "low/plain.py": "import pkg.high.x\n",
        "low/from_package.py": "from pkg import high\n",
        "low/from_module.py": "from pkg.high.x import name\n",
        "low/relative_up.py": "from ..high import x\n",
        "low/from_root.py": "from pkg import name\n",
        "low/inside.py": "def run():\n    from pkg.high import x\n    return x\n",
        "middle.py": "from . import high\n",
        "low/fine.py": "from pkg.low import x\nfrom . import x as y\nimport pkg.low\n",
        "high/fine.py": "from pkg import low, middle\nfrom ..low import x\n",
        "high/lazy.py": "def run():\n    from pkg.low import x\n    return x\n",
        "high/allowed.py": "def run():\n    import pkg.low.x\n    return pkg\n",
    }
    for name, source in sources.items():
        (package / name).write_text(source)
    layers = ("low", "middle", "high", "__init__")

    upward = upward_imports("pkg", layers, tmp_path)
    assert {line.split(":")[0] for line in upward} == {
        f"pkg/{name}" for name in sources if not name.endswith(("fine.py", "lazy.py", "allowed.py"))
    }
    allowed = {("pkg/high/allowed.py", "pkg.low.x"): "a reason"}
    deferred = deferred_imports("pkg", tmp_path, allowed)
    assert {line.split(":")[0] for line in deferred} == {"pkg/low/inside.py", "pkg/high/lazy.py"}
    assert unlisted_layers("pkg", ("low", "high"), tmp_path) == {"middle", "__init__"}
