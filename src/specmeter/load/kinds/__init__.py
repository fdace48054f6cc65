"""Load kinds, registered by the `kind` tag of their points: one object per kind of load point owns its point
model, strategy, steady window and headline metric (load/kinds/base.py says what each provides).

A new kind (as trace replay was) is a point model in config/points.py, a module here with its LoadKind and Strategy,
one entry in KINDS, and its plot labels in report/load_labels.py.
"""

from __future__ import annotations

from typing import Any

from specmeter.common.registry import Registry
from specmeter.config.models import LoadPoint
from specmeter.load.kinds.base import LoadKind
from specmeter.load.kinds.closed import ClosedLoopKind
from specmeter.load.kinds.open import OpenLoopKind
from specmeter.load.kinds.trace import TraceKind

KINDS: Registry[type[LoadKind[Any]]] = Registry(
    "load kind", {kind.name: kind for kind in (ClosedLoopKind, OpenLoopKind, TraceKind)})


def kind_of(point: LoadPoint) -> LoadKind[Any]:
    """The point's kind, bound to it."""
    return KINDS[point.kind](point)
