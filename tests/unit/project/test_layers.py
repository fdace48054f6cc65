"""The shape of src/specmeter as a contract: the pipeline's floors (import-linter, pyproject.toml), no import
circle between any two modules (lazy imports inside functions count too), and only packages at the root.
A module holds one concept, whatever its length: the old line limit drove splits by size, not by concept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

SRC = Path(__file__).resolve().parents[3] / "src" / "specmeter"


def test_the_floors_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=SRC.parents[1], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each a circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(graph.find_modules_directly_imported_by(module)):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_circle() -> None:
    graph = grimp.build_graph("specmeter", include_external_packages=False)
    circles = _circles(graph)
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_only_packages_at_the_root() -> None:
    modules = sorted(p.name for p in SRC.glob("*.py") if p.name not in {"__init__.py", "__main__.py"})
    assert not modules, f"modules at the root of src/specmeter (put each in the package of its concept): {modules}"
