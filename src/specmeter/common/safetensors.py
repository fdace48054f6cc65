"""A safetensors file's header, read without torch: 8 bytes of little-endian header length, then a JSON header
naming every tensor's dtype, shape and byte offsets. What a checkpoint holds (its tensors' names, its parameter
count, one small tensor) is known from it without reading a weight."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

MAX_HEADER = 100 * 2**20  # a header this large is not a safetensors header
INDEX = "model.safetensors.index.json"  # a sharded checkpoint's: each tensor's shard (weight_map), total_size


def read_header(path: Path) -> tuple[dict[str, Any], int] | None:
    """The header and the offset where the tensors' bytes begin; None where `path` is not a readable safetensors
    file."""
    try:
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return None
            (size,) = struct.unpack("<Q", head)
            if not 0 < size <= MAX_HEADER:
                return None
            parsed = json.loads(f.read(size))
    except (OSError, ValueError):
        return None
    return (parsed, 8 + size) if isinstance(parsed, dict) else None
