"""The text forms flag values take (lists, ranges, KEY=VALUE pairs), parsed. A ValueError's message names the
form that was expected; the command line shows it as its usage error."""

from __future__ import annotations

import json
from typing import Any

from specmeter.errors import InputError
from specmeter.placement.inventory import parse_gpu_ids


def levels(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise ValueError(f"{text!r}: give concurrency levels as integers, e.g. 1,4,16") from None


def levels_or_auto(text: str) -> list[int] | str:
    """Concurrency levels, or `auto`: a load search chooses them (sweep)."""
    return "auto" if text.strip() == "auto" else levels(text)


def rates(text: str) -> list[float]:
    try:
        return [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise ValueError(f"{text!r}: give request rates as numbers (requests/s), e.g. 0.5,2") from None


def token_range(text: str) -> tuple[int, int]:
    lo, _sep, hi = text.partition(":")
    try:
        return int(lo), int(hi)
    except ValueError:
        raise ValueError(f"{text!r}: give a token range as LO:HI, e.g. 0:512") from None


def pairs(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{item!r}: give it as KEY=VALUE")
        out[key] = value
    return out


def options(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs; values that parse as JSON (numbers, true/false, lists) are taken as such."""
    out: dict[str, Any] = {}
    for key, value in pairs(items).items():
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def drop(text: str) -> float:
    """A largest drop allowed: a percentage (2%) or a fraction (0.02), at least 0 and below 100%."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueError(f"{text!r}: give a percentage like 2% or a fraction like 0.02") from None
    if not raw.endswith("%") and value >= 1.0:
        raise ValueError(f"{text!r}: a bare number is a fraction (0.02 is 2%); write {raw}% for a percentage")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{text!r}: a drop is at least 0% and below 100%")
    return value


def gpu_ids(text: str) -> list[str]:
    """`--gpus 0,1`: GPU ids."""
    try:
        return parse_gpu_ids(text, "--gpus")
    except InputError as exc:
        raise ValueError(str(exc)) from None
