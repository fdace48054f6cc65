"""Every text form a flag's value takes, parsed: lists of levels, K, sizes and rates, `auto`, KEY=VALUE pairs,
input lengths, percentages. One error type for all: InputError (exit 2), one line that names the flag,
says what is wrong and shows the form it takes."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from specmeter.common.errors import InputError, validation_message
from specmeter.config.k_range import parse_k_range
from specmeter.config.slo import SLO

# An input length as the sweep file's workload.input_len takes it: lengths (N or N1,N2: prompts shaped to
# exactly each) or a range (LO:HI: the dataset's own prompts with LO <= input tokens < HI).
InputLen = list[int] | tuple[int, int]


def _bad(flag: str, text: str, problem: str, form: str) -> InputError:
    return InputError(f"{flag} {text}: {problem}; give {form}")


def _items(text: str) -> list[str]:
    return [x for x in text.replace(" ", "").split(",") if x]


def _positive_ints(text: str, flag: str, form: str) -> list[int]:
    items = _items(text)
    if not items:
        raise _bad(flag, repr(text), "no value", form)
    try:
        values = [int(x) for x in items]
    except ValueError:
        wrong = next(x for x in items if not x.lstrip("-").isdigit())
        raise _bad(flag, text, f"{wrong!r} is not a whole number", form) from None
    if min(values) < 1:
        raise _bad(flag, text, "every value is a positive whole number", form)
    return values


def levels_or_auto(text: str, flag: str = "--concurrency") -> list[int] | str:
    """Concurrency levels, or `auto`: a load search chooses them (sweep)."""
    if text.strip() == "auto":
        return "auto"
    if "auto" in _items(text):
        raise _bad(flag, text, "auto stands alone (the load search picks the points)", "auto or a list like 1,4,16")
    return _positive_ints(text, flag, "auto or concurrency levels like 1,4,16")


def ks(text: str, flag: str = "--k") -> list[int]:
    """Draft lengths K: `1,2,4`."""
    return _positive_ints(text, flag, "draft lengths K like 1,2,4")


def k_range(text: str, flag: str = "--propose-k") -> tuple[int, int]:
    """A range of draft lengths, lowest and highest included: `1-6` (or one K: `3`)."""
    try:
        return parse_k_range(text)
    except ValueError as exc:
        raise InputError(f"{flag} {exc}") from None


def sizes(text: str, flag: str, example: str) -> list[int]:
    """Positive counts: engine batch sizes, draft vocabulary sizes."""
    return _positive_ints(text, flag, f"positive whole numbers like {example}")


def rates(text: str, flag: str = "--request-rate") -> list[float]:
    """Request rates, conversations per second: `0.5,2`."""
    form = "request rates (requests/s) like 0.5,2"
    items = _items(text)
    try:
        values = [float(x) for x in items]
    except ValueError:
        raise _bad(flag, text, "not numbers", form) from None
    if not values or min(values) <= 0:
        raise _bad(flag, repr(text), "every rate is above 0", form)
    return values


def input_len(text: str, flag: str = "--input-len") -> InputLen:
    """N or N1,N2 (lengths: prompts shaped to exactly each), or LO:HI (a range of the dataset's own prompts)."""
    form = "N or N1,N2 (input lengths) or LO:HI (a range, e.g. 0:512)"
    if ":" in text:
        lo, _sep, hi = text.partition(":")
        if not lo.strip().isdigit() or not hi.strip().isdigit():
            raise _bad(flag, text, "a range is two whole numbers", form)
        if not int(lo) < int(hi):
            raise _bad(flag, text, "a range's LO is below its HI", form)
        return int(lo), int(hi)
    values = _positive_ints(text, flag, form)
    if len(set(values)) != len(values):
        raise _bad(flag, text, "a length appears twice", form)
    return values


def one_length(value: InputLen, command: str, flag: str = "--input-len") -> int:
    """The input length read (`input_len`), where a command takes exactly one (N)."""
    if isinstance(value, tuple) or len(value) != 1:
        shown = ":".join(map(str, value)) if isinstance(value, tuple) else ",".join(map(str, value))
        raise _bad(flag, shown, f"{command} takes one input length", "N, e.g. 1024")
    return value[0]


def pairs(items: list[str], flag: str) -> dict[str, str]:
    """KEY=VALUE items of a repeatable flag."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or key.startswith("-"):
            raise _bad(flag, item, "not KEY=VALUE", "KEY=VALUE, e.g. VLLM_CPU_KVCACHE_SPACE=4")
        out[key] = value
    return out


def options(items: list[str], flag: str) -> dict[str, Any]:
    """KEY=VALUE pairs; values that parse as JSON (numbers, true/false, lists) are taken as such."""
    out: dict[str, Any] = {}
    for key, value in pairs(items, flag).items():
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def sbatch_options(items: list[str], flag: str = "--slurm-option") -> dict[str, str]:
    """`--slurm-option KEY=VALUE` or `KEY` alone (sbatch's --KEY=VALUE, --KEY)."""
    out: dict[str, str] = {}
    for item in items:
        key, _sep, value = item.partition("=")
        if not key or key.startswith("-"):
            raise _bad(flag, item, "not KEY=VALUE or KEY (sbatch's option without its dashes)",
                       "e.g. mem=64G or exclusive")
        out[key] = value
    return out


def drop(text: str, flag: str) -> float:
    """A largest drop allowed: a percentage (2%) or a fraction (0.02), at least 0 and below 100%."""
    raw = text.strip()
    form = "a percentage like 2% or a fraction like 0.02"
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise _bad(flag, text, "not a number", form) from None
    if not raw.endswith("%") and value >= 1.0:
        raise _bad(flag, text, "a bare number is a fraction (0.02 is 2%)", f"{raw}% for a percentage")
    if not 0.0 <= value < 1.0:
        raise _bad(flag, text, "a drop is at least 0% and below 100%", form)
    return value


def slo(text: str, flag: str = "--slo") -> SLO:
    """Per-request bounds: `ttft_ms=500,tpot_ms=50`."""
    raw: dict[str, Any] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"{flag}: expected KEY=VALUE pairs like ttft_ms=500,tpot_ms=50, got {item!r}")
        raw[key.strip()] = value.strip()
    try:
        return SLO.model_validate(raw)
    except ValidationError as exc:
        raise InputError(validation_message(exc, flag, SLO)) from exc


def once(values: list[str] | None, flag: str, why: str) -> str | None:
    """A repeatable flag's value where a command takes one (None: not given)."""
    if not values:
        return None
    if len(values) > 1:
        raise InputError(f"{flag} given {len(values)} times: {why}; give it once")
    return values[0]
