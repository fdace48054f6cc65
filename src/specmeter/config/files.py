"""Reading configuration from files and flags: YAML read safely, JSON parsed, and the first validation error
turned into one line that names the key and the fix."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from specmeter.common.errors import InputError, validation_message
from specmeter.config.models import POINT_KINDS, EngineSpec, LoadSpec, SpecConfig
from specmeter.config.workload import WorkloadSpec

M = TypeVar("M", bound=BaseModel)


def parse_spec_json(text: str, where: str = "--spec") -> SpecConfig:
    """Parse a speculative config from JSON (CLI) with an error naming the key and the fix."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); quote it like "
                         '\'{"method": "ngram", "num_speculative_tokens": 4}\'') from exc
    spec: SpecConfig = build_model(SpecConfig, raw, where)
    return spec


def build_model(cls: type[M], raw: Any, where: str) -> M:
    """Validate `raw` into `cls`; a pydantic error becomes the one line naming the key and the fix."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a mapping of keys to values, got {type(raw).__name__}")
    try:
        return cls.model_validate(raw)
    except ValidationError as exc:
        raise InputError(validation_message(exc, where, cls, POINT_KINDS)) from exc


def laid_over(cls: type[M], section: M | Mapping[str, Any] | None, given: Mapping[str, Any], where: str) -> M:
    """The one merge of a file and the flags: the settings given (None: not given) over the file's section, over
    the fields' defaults, validated as the file is. A section already validated is returned as it is where no
    flag was given, and else read from its own values, never serialized (a secret in engine.extra_args stays
    whole). A model's `REPLACES`: keys of which any one given replaces them all (a load's points)."""
    flags = {key: v for key, v in given.items() if v is not None}
    replaces: tuple[str, ...] = getattr(cls, "REPLACES", ())
    own: Mapping[str, Any]
    if isinstance(section, cls):
        if not flags:
            return section
        own = {name: getattr(section, name) for name in section.model_fields_set}
    elif isinstance(section, Mapping):
        own = section
    elif not section:
        own = {}
    else:
        return build_model(cls, section, where)  # not a mapping: refused in one line
    if set(flags) & set(replaces):
        own = {key: v for key, v in own.items() if key not in replaces}
    return build_model(cls, {**own, **flags}, where)


@dataclass(frozen=True)
class Sections:
    """The settings sections of a run file or a sweep file, with the flags given over them."""

    workload: WorkloadSpec
    load: LoadSpec
    engine: EngineSpec


def sections_over(file: Mapping[str, Any] | BaseModel, given: Mapping[str, Mapping[str, Any]], where: str) -> Sections:
    """Each settings section of `file` (a run file as read, or a sweep file validated) with the flags `given` for
    it over it, by laid_over: the flags, then the file, then the fields' defaults. A file's workload.num_prompts is
    its second key for load.num_prompts, and wins there; --num-prompts wins over both."""
    section: Callable[[str], Any] = (lambda name: getattr(file, name)) if isinstance(file, BaseModel) else file.get
    workload = laid_over(WorkloadSpec, section("workload"), given.get("workload", {}), f"{where}: workload")
    load = laid_over(LoadSpec, section("load"), given.get("load", {}), f"{where}: load")
    engine = laid_over(EngineSpec, section("engine"), given.get("engine", {}), f"{where}: engine")
    if given.get("load", {}).get("num_prompts") is not None:
        workload = workload.model_copy(update={"num_prompts": None})
    elif workload.num_prompts is not None:
        load = load.model_copy(update={"num_prompts": workload.num_prompts})
    return Sections(workload, load, engine)


def load_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML config with the safe loader (no object construction)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InputError(f"{path}: config file not found; check the path") from exc
    except IsADirectoryError as exc:
        raise InputError(f"{path}: a directory, not a config file; give the YAML file itself") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a text file (not UTF-8); give the YAML config file") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror}); check the path and its permissions") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}{line}: not valid YAML ({getattr(exc, 'problem', exc)}); fix the syntax") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"{path}: top level must be a mapping of keys, got {type(data).__name__}")
    return data
