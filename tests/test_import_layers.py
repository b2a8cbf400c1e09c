"""The package's layers depend downwards only: no import cycle, and progress imports no view.

DESIGN section 3: api -> engines -> protocol -> committers -> store, with the progress events
below everything that renders or computes them. A cycle (progress -> aftermath -> progress,
progress -> widgets -> progress) made the core and its front ends one tangle.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import s3commit_sdk

PACKAGE = Path(s3commit_sdk.__file__).parent
NAME = PACKAGE.name


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = [NAME, *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that ``module`` imports when it runs: at the top and inside
    functions (a lazy import is still an edge), not under ``if TYPE_CHECKING:``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:  # `from . import x` imports the module x
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return {name for name in found if name in known and name != module}


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {module: imported(module, path, known) for module, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_progress_imports_only_what_is_below_it():
    assert import_graph()[f"{NAME}.progress"] <= {f"{NAME}.errors", f"{NAME}.textformat"}


def test_importing_progress_loads_no_view_and_no_failure_analysis():
    """In a fresh interpreter, progress alone (without the package's ``__init__``, which loads
    the whole API): neither the aftermath (it lists S3) nor the widgets come along."""
    script = f"""
import json, sys, types
package = types.ModuleType({NAME!r})
package.__path__ = [{str(PACKAGE)!r}]
sys.modules[{NAME!r}] = package
import {NAME}.progress
print(json.dumps(sorted(m for m in sys.modules if m.startswith({NAME!r}))))
"""
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        ).stdout
    )
    assert f"{NAME}.progress" in loaded
    for above in ("aftermath", "widgets", "api", "runner", "engines", "listeners"):
        assert f"{NAME}.{above}" not in loaded, loaded
