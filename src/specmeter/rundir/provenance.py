"""What a run records about where its numbers come from: the models' content hashes and the machine."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

from specmeter import __version__
from specmeter.common.hashing import file_sha256
from specmeter.common.installed import installed_version


def model_fingerprint(model: str | None) -> dict[str, Any] | None:
    """Content hashes of a local model directory's weights and config, or of a .gguf file (hub ids: the id)."""
    if not model:
        return None
    p = Path(model)
    if p.is_file() and p.suffix == ".gguf":
        return {"path": str(p.resolve()), "sha256": {p.name: file_sha256(p)}}
    if not p.is_dir():
        return {"id": model}
    files = sorted(
        f for f in p.iterdir() if f.suffix in {".safetensors", ".bin", ".json"} and f.is_file()
    )
    return {"path": str(p.resolve()), "sha256": {f.name: file_sha256(f) for f in files}}


def environment_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "specmeter": __version__,
        "uvloop": installed_version("uvloop"),  # the client's event loop when load.event_loop is auto
    }
