"""One entry point from a workload name (CLI flag, config file) to a list of Conversations.

Options are checked against the loader's own parameters, so a misspelt option is reported with the
accepted ones instead of failing deep inside a loader.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from specmeter.common.errors import InputError
from specmeter.common.registry import Registry
from specmeter.data.gsm8k import load_gsm8k
from specmeter.data.jsonl import load_jsonl
from specmeter.data.model import Conversation
from specmeter.data.mtbench import load_question_file
from specmeter.data.random_tokens import load_random
from specmeter.data.sample import load_sample
from specmeter.data.sonnet import load_sonnet
from specmeter.data.speed_bench import load_speed_bench


@dataclass(frozen=True)
class WorkloadSource:
    load: Callable[..., list[Conversation]]
    needs_path: bool
    what: str  # shown when the path is missing


WORKLOADS: Registry[WorkloadSource] = Registry("workload", {
    "sample": WorkloadSource(load_sample, False, "built-in sample set"),
    "jsonl": WorkloadSource(load_jsonl, True, "a JSONL file"),
    "speed-bench": WorkloadSource(load_speed_bench, True, "a prepared SPEED-Bench file or directory"),
    "gsm8k": WorkloadSource(load_gsm8k, True, "the GSM8K directory or its test parquet file"),
    "mt-bench": WorkloadSource(partial(load_question_file, name="mt-bench"), True, "MT-Bench question.jsonl"),
    "spec-bench": WorkloadSource(partial(load_question_file, name="spec-bench"), True, "Spec-Bench question.jsonl"),
    "sonnet": WorkloadSource(load_sonnet, True, "a poem text file"),
    "random": WorkloadSource(load_random, False, "no file (synthetic token ids)"),
})


def load_workload(name: str, path: str | None = None, **options: Any) -> list[Conversation]:
    """Load the named workload; unknown names, missing paths and unknown options raise InputError."""
    source = WORKLOADS.get(name)
    if source.needs_path and not path:
        raise InputError(f"workload {name!r} needs a path: {source.what}")
    if not source.needs_path and path:
        raise InputError(f"workload {name!r} takes no path ({source.what}); drop the path")
    accepted = _option_names(source.load)
    unknown = sorted(set(options) - accepted)
    if unknown:
        allowed = ", ".join(sorted(accepted)) or "none"
        raise InputError(f"workload {name!r} has no option {', '.join(unknown)}; accepted options: {allowed}")
    required = _required_options(source.load) - set(options)
    if required:
        raise InputError(f"workload {name!r} needs option(s) {', '.join(sorted(required))}")
    return source.load(path, **options) if source.needs_path else source.load(**options)


def _parameters(load: Callable[..., Any]) -> list[inspect.Parameter]:
    """Keyword options of a loader, without the path (its first parameter) and the fixed name."""
    bound = set(load.keywords) if isinstance(load, partial) else set()
    params = list(inspect.signature(load).parameters.values())
    return [p for p in params if p.name not in bound and p.name != "path"]


def _option_names(load: Callable[..., Any]) -> set[str]:
    return {p.name for p in _parameters(load)}


def _required_options(load: Callable[..., Any]) -> set[str]:
    return {p.name for p in _parameters(load) if p.default is inspect.Parameter.empty}
