"""One read of an engine endpoint, kept as it came: the raw material of a point's capture."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from specmeter.schemas.capture import Scrape

# GET `path` of the server (with a timeout in seconds) and return the body: the client's get_text.
Fetch = Callable[[str, float], Awaitable[str]]


def why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}"


async def scrape(fetch: Fetch, path: str, t0: float, timeout_s: float = 30.0) -> Scrape:
    """The text at `path` with its arrival time (seconds since `t0` on time.perf_counter), or why not. A server
    whose metrics cannot be read still gets measured: the summary says why the counters are missing."""
    try:
        text = await fetch(path, timeout_s)
    except Exception as exc:
        return Scrape(at_s=time.perf_counter() - t0, error=f"{path} could not be read ({why(exc)})")
    return Scrape(at_s=time.perf_counter() - t0, text=text)
