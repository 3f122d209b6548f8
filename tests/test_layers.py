"""The import contract: gnomon's layers import one way, and torch loads only where it is needed.

import-linter cannot follow this repository's package-dir mapping (compiler/ is `gnomon`), so this test reads the
import graph itself, with `ast`, from the source files: module-level and function-level imports alike.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("utilities", ("gnomon.errors", "gnomon.files", "gnomon.locations", "gnomon.machine")),
    ("dialects", ("gnomon.dialects",)),
    ("reference", ("gnomon.reference",)),
    ("cost", ("gnomon.cost",)),
    ("passes", ("gnomon.passes",)),
    ("runtime", ("gnomon.runtime",)),
    ("top", ("gnomon",)),
)
"""The layers, lowest first, and the packages or modules each holds: a module imports only from its own layer or
those below. A module belongs to the layer of its longest matching prefix (everything else in `gnomon` is top)."""

TORCH = ("torch", "torch_mlir")
"""The packages the torch rule is about."""

TORCH_AT_MODULE_LEVEL: dict[str, tuple[str, ...]] = {
    "torch": (
        "gnomon.frontends.composites",
        "gnomon.frontends.torch",
        "gnomon.frontends.torch_control_flow",
        "gnomon.frontends.torch_training",
        "gnomon.frontends.training_lstm",
        "gnomon.models",
        "gnomon.pytorch_memory",
        "gnomon.runtime.distributed",  # torch.distributed's processes, spawned by `gnomon calibrate --collectives`
        "gnomon.runtime.library",
        "gnomon.runtime.torch_eager",
        "gnomon.sharding",  # runs a torch model once to find its embedding tables and the ids they look up
        "gnomon.torchrec_plan",  # TorchRec's modules are torch modules
        "gnomon.torchrec_steps",  # TorchRec's ranks, spawned by `gnomon calibrate --collectives` and the bench
    ),
    "torch_mlir": (
        "gnomon.frontends",  # every frontend is a torch-mlir importer; torch_mlir's bindings load no torch
        "gnomon.models",
        "gnomon.runtime.library",
        "gnomon.runtime.torch_eager",
    ),
}
"""The modules (or packages) that may import torch or torch_mlir when they are imported."""

TORCH_NOWHERE = ("utilities", "dialects", "cost", "passes")
"""Layers that never import torch or torch_mlir, not even inside a function. (gnomon.reference may, lazily, where
NumPy has no kernel; the runtime and the top layer may, inside functions.)"""

TORCH_FREE_PACKAGES = ("gnomon.dialects", "gnomon.cost", "gnomon.passes")
"""Packages whose every module imports without loading torch."""


def layer_of(module: str) -> str:
    """The layer of a gnomon module: its longest matching prefix in LAYERS."""
    best, length = "", -1
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            if _within(module, prefix) and len(prefix) > length:
                best, length = name, len(prefix)
    return best


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _rank(layer: str) -> int:
    return [name for name, _ in LAYERS].index(layer)


def source_modules() -> dict[str, Path]:
    """Every module of gnomon and its file, from pyproject.toml's package-dir mapping."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        package_dir: dict[str, str] = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    modules: dict[str, Path] = {}
    for package, folder in package_dir.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


@dataclass(frozen=True)
class Import:
    """One import statement's target, as seen in the importing module's source."""

    importer: str
    imported: str
    line: int
    in_function: bool
    """Inside a function (runs when called), else when the module is imported."""
    type_checking: bool
    """Under `if TYPE_CHECKING:`: seen by type checkers only, never run."""


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(module: str, path: Path, known: set[str]) -> Iterator[Import]:
    """The modules `module` imports, resolved to gnomon's module names where they are gnomon's."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(module, alias.name, child.lineno, in_function, type_checking)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                for alias in child.names:
                    submodule = f"{base}.{alias.name}"
                    target = submodule if submodule in known else base
                    yield Import(module, target, child.lineno, in_function, type_checking)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                yield from visit(child, in_function, True)
            else:
                function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                yield from visit(child, in_function or function, type_checking)

    yield from visit(tree, False, False)


def import_graph() -> list[Import]:
    modules = source_modules()
    known = set(modules)
    return [found for module, path in modules.items() for found in imports_of(module, path, known)]


def test_every_module_has_a_layer() -> None:
    unplaced = [module for module in source_modules() if not layer_of(module)]
    assert not unplaced, f"modules outside every layer of LAYERS: {unplaced}"


def test_layers_import_only_downwards() -> None:
    violations = dict.fromkeys(
        f"{found.importer} ({layer_of(found.importer)}) imports {found.imported} ({layer_of(found.imported)}) "
        f"at line {found.line}"
        for found in import_graph()
        if _within(found.imported, "gnomon") and _rank(layer_of(found.imported)) > _rank(layer_of(found.importer))
    )
    layers = " < ".join(name for name, _ in LAYERS)
    assert not violations, f"imports from a higher layer ({layers}):\n" + "\n".join(violations)


def test_no_cycle_between_layers() -> None:
    edges: dict[str, set[str]] = {name: set() for name, _ in LAYERS}
    witness: dict[tuple[str, str], Import] = {}
    for found in import_graph():
        if not _within(found.imported, "gnomon"):
            continue
        source, target = layer_of(found.importer), layer_of(found.imported)
        if source != target:
            edges[source].add(target)
            witness.setdefault((source, target), found)
    cycle = _find_cycle(edges)
    if cycle is None:
        return
    steps: list[str] = []
    for source, target in pairwise(cycle):
        found = witness[source, target]
        steps.append(f"{source} -> {target}: {found.importer} imports {found.imported} at line {found.line}")
    raise AssertionError("layers import each other in a cycle:\n" + "\n".join(steps))


def _find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a path that ends where it starts, or None."""
    done: set[str] = set()

    def walk(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for target in sorted(edges[node]):
            cycle = walk(target, [*path, node])
            if cycle is not None:
                return cycle
        done.add(node)
        return None

    for node in edges:
        cycle = walk(node, [])
        if cycle is not None:
            return cycle
    return None


def test_torch_only_where_allowed() -> None:
    violations: dict[str, None] = {}
    for found in import_graph():
        package = next((name for name in TORCH if _within(found.imported, name)), None)
        if package is None or found.type_checking:
            continue
        layer = layer_of(found.importer)
        where = "inside a function" if found.in_function else "at module level"
        line = f"{found.importer} ({layer}) imports {found.imported} {where}, line {found.line}"
        if layer in TORCH_NOWHERE:
            violations[f"{line}: the {layer} layer never imports {package}"] = None
        elif not found.in_function and not any(_within(found.importer, m) for m in TORCH_AT_MODULE_LEVEL[package]):
            violations[f"{line}: only {', '.join(TORCH_AT_MODULE_LEVEL[package])} import it at module level"] = None
    assert not violations, "torch imported where the contract forbids it:\n" + "\n".join(violations)


def test_torch_free_packages_load_no_torch() -> None:
    """Importing every module of the dialects, the cost package and the passes leaves torch unloaded."""
    modules = [m for m in source_modules() if any(_within(m, package) for package in TORCH_FREE_PACKAGES)]
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(name for name in {TORCH!r} if name in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"importing {', '.join(TORCH_FREE_PACKAGES)} loaded {result.stdout.strip()}"
