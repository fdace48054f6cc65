"""Attach mode's endpoint field: one base URL, or a list of data-parallel replicas of one server.

One URL stays a plain string (as every stored plan before replicas has it, and as it serializes back); a list of
one is that string; two or more stay a list. Below config/models.py (EngineSpec and the sweep file take their values
from here), so every place that sets an endpoint normalizes it the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from specmeter.config.flags import Flag
from specmeter.config.points import StrictModel

# What a config file, a flag or a stored plan may give: a URL, or a list of the replicas' URLs.
Endpoint = str | list[str]


def normalize_endpoint(value: str | Sequence[str] | None) -> Endpoint | None:
    """`value` checked (http(s) URLs, no repeats, at least one) and in its stored form: one URL as a string,
    several as a list; None stays None (launch mode)."""
    if value is None:
        return None
    urls = [value] if isinstance(value, str) else list(value)
    if not urls:
        raise ValueError("endpoint: an empty list attaches to nothing; give at least one base URL")
    seen: set[str] = set()
    for url in urls:
        check_url(url)
        key = url.rstrip("/")
        if key in seen:
            raise ValueError(f"endpoint {url!r} is given twice; list each replica once")
        seen.add(key)
    return urls[0] if len(urls) == 1 else urls


def check_url(url: object) -> None:
    """One base URL, checked where it is parsed: scheme http or https, a host, a port that is a number."""
    if not isinstance(url, str):
        raise ValueError(f"endpoint {url!r}: give a base URL, e.g. http://localhost:8000")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        # urlsplit reads "localhost:8000" as scheme "localhost": the usual slip is a URL without its scheme
        bare = url.split("://", 1)[-1]
        raise ValueError(f"endpoint {url!r}: give the URL with its scheme, e.g. http://{bare}")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if not parts.hostname or port == -1:
        raise ValueError(f"endpoint {url!r}: give a host and a numeric port, e.g. http://localhost:8000")


def endpoint_list(value: Endpoint | None) -> list[str]:
    """The replicas' URLs ([] in launch mode)."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def endpoint_label(value: Endpoint | None) -> str | None:
    """One line naming the endpoint: its URL, or the first replica's and how many there are."""
    urls = endpoint_list(value)
    if not urls:
        return None
    return urls[0] if len(urls) == 1 else f"{urls[0]} (+{len(urls) - 1} replicas)"


class BaselineServer(StrictModel):
    """Attach mode's speculation-off server, for the speedup: a sweep file's top-level key, and run's and sweep's
    flag."""

    baseline_endpoint: Annotated[Endpoint | None, Flag("--baseline-endpoint")] = Field(
        default=None, description="Attach mode: a server with speculation off, for the speedup (repeat it for "
        "replicas; a file's list: its data-parallel replicas).")

    _baseline_endpoint = field_validator("baseline_endpoint")(normalize_endpoint)
