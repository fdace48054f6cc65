"""What a long server start is doing, in one line the progress shows once it has run past SLOW_START_S.

An engine that compiles kernels on its first start (vLLM: torch.compile and inductor, on the CPU build too) keeps
them in a cache that later starts reuse, so a first start on a machine can take minutes and the next a fraction of
it. The cache's state is read when the server is spawned (it fills while the server starts), and how long the last
start in the same state took (this engine, this model) is kept in specmeter's own small record
($XDG_CACHE_HOME/specmeter/server_starts.json, ~/.cache by default), so the line can say "about N s" from this
machine's own start, or from an estimate where none was recorded.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SLOW_START_S = 20.0  # a start past this without serving gets a line saying what it is doing
COLD_START_ESTIMATE_S = 90.0  # a first start's compilation where no earlier one was recorded (a small model)

CacheState = Literal["empty", "warm"]


def cache_state(path: Path | None) -> CacheState | None:
    """Whether the compile cache at `path` holds anything yet (None: the engine keeps none)."""
    if path is None:
        return None
    return "warm" if path.is_dir() and any(path.iterdir()) else "empty"


def record_path() -> Path:
    """specmeter's record of how long servers took to start, per engine, model and cache state."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "specmeter" / "server_starts.json"


def _key(engine: str, model: str, cache: CacheState) -> str:
    return f"{engine} {model} {cache}"


def _read() -> dict[str, float]:
    try:
        found = json.loads(record_path().read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in found.items()} if isinstance(found, dict) else {}


@dataclass(frozen=True)
class StartWatch:
    """One server's start, as its progress line reads it: its compile cache's state when it was spawned (None: the
    engine compiles nothing worth telling) and how long the last start in that state took (None: none recorded)."""

    server: str
    engine: str
    model: str
    cache: CacheState | None
    previous_s: float | None

    @classmethod
    def of(cls, server: str, engine: str, model: str, cache_dir: Path | None) -> StartWatch:
        """Read before the server is spawned: the cache's state, and the start recorded for it."""
        cache = cache_state(cache_dir)
        previous = None if cache is None else _read().get(_key(engine, model, cache))
        return cls(server, engine, model, cache, previous)

    def line(self, elapsed_s: float) -> str | None:
        """What the start is doing, once it has run past SLOW_START_S (None before)."""
        if elapsed_s < SLOW_START_S:
            return None
        head = f"server {self.server} starting, {elapsed_s:.0f} s"
        if self.cache == "empty":
            about = (f"about {self.previous_s:.0f} s (its last first start)" if self.previous_s is not None
                     else f"about {COLD_START_ESTIMATE_S:.0f} s (an estimate)")
            return f"{head}: compiling kernels for the first run on this machine, {about}; later runs reuse them"
        if self.cache == "warm":
            last = f", about {self.previous_s:.0f} s last time" if self.previous_s is not None else ""
            return f"{head}: loading the model and the kernels an earlier run compiled{last}"
        return f"{head}: loading the model"

    def record(self, seconds: float) -> None:
        """Keep how long this start took to serve, for the next start's line (nothing where no cache was read;
        a record that cannot be written is left as it was: it only improves a message)."""
        if self.cache is None:
            return
        found = {**_read(), _key(self.engine, self.model, self.cache): round(seconds, 1)}
        path = record_path()
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(found, indent=1, sort_keys=True))
