"""A benchmarks/ script loaded as a module for its tests (the scripts are no package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def load(name: str) -> ModuleType:
    """benchmarks/<name>.py as module `name`: registered in sys.modules (dataclasses look their module up there),
    with benchmarks/ on the path for the siblings a script imports."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(1, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
