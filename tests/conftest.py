"""Shared test setup: the fake engine package (fakeengine) and the helper modules (data_fixtures,
vllm_helpers) import by name."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent
for sub in (_TESTS, _TESTS / "unit", _TESTS / "integration"):
    if str(sub) not in sys.path:
        sys.path.insert(0, str(sub))
