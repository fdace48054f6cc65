"""Parameters counted from the safetensors files beside a config.json, to check the count its shapes give.

A safetensors file opens with an 8-byte little-endian header length and a JSON header naming every tensor's
dtype and shape, so the count is exact without reading a single weight. Shards that are not all present fall
back on the index's `metadata.total_size` (bytes), divided by the config's bytes per parameter."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from specmeter.common.safetensors import INDEX, read_header


def _header(path: Path) -> dict[str, Any] | None:
    read = read_header(path)
    return None if read is None else read[0]


# An EAGLE-3 head's draft-vocabulary maps (offsets and a mask over the target's ids): stored beside the weights,
# multiplied by nothing.
VOCAB_MAPS = ("d2t", "t2d")


def _count(header: dict[str, Any]) -> int:
    return sum(math.prod(int(d) for d in entry.get("shape", [])) for name, entry in header.items()
               if name != "__metadata__" and isinstance(entry, dict) and name.rsplit(".", 1)[-1] not in VOCAB_MAPS)


def checkpoint_params(model_dir: Path, bytes_per_param: float | None) -> tuple[int | None, str | None]:
    """(count, how it was counted) from the safetensors in `model_dir`; (None, None) when there are none."""
    index: dict[str, Any] | None = None
    try:
        index = json.loads((model_dir / INDEX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        index = None
    shards = sorted(model_dir.glob("*.safetensors"))
    if index is not None and isinstance(index.get("weight_map"), dict):
        wanted = {str(v) for v in index["weight_map"].values()}
        if wanted - {p.name for p in shards}:
            total = (index.get("metadata") or {}).get("total_size")
            if isinstance(total, int | float) and total > 0 and bytes_per_param:
                return round(total / bytes_per_param), f"{INDEX} total_size / {bytes_per_param:g} bytes"
            return None, None
        shards = [model_dir / name for name in sorted(wanted)]
    headers = [_header(p) for p in shards]
    if not headers or any(h is None for h in headers):
        return None, None
    return sum(_count(h) for h in headers if h is not None), ", ".join(p.name for p in shards[:3]) + (
        f" and {len(shards) - 3} more" if len(shards) > 3 else "") + " headers"
