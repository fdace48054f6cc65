"""What `run` is asked beyond the settings it shares with `sweep` (its YAML file, whether the speculation-off baseline
runs beside the config, and the same pair on random tokens too), and its file and flags resolved into the settings
it measures with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from specmeter.common.errors import InputError, SpecmeterError
from specmeter.config.files import build_model, load_yaml, parse_spec_json, sections_over
from specmeter.config.flags import Flag
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.config.points import StrictModel
from specmeter.config.workload import WorkloadSpec


class RunOptions(StrictModel):
    """run's own settings."""

    config: Annotated[Path | None, Flag("--config")] = Field(
        default=None, description="YAML file with engine/spec/workload/load sections (flags override it).")
    baseline: Annotated[bool, Flag("--baseline")] = Field(
        default=True, description="Also run the same engine with speculation off, for the speedup.")
    compare_random: Annotated[bool, Flag("--compare-random", negatable=False)] = Field(
        default=False, description="Also run the same config on random tokens of the dataset's lengths, side by "
        "side: how much of the speedup is the workload's.")
    vocab_size: Annotated[int | None, Flag("--vocab-size")] = Field(
        default=None, ge=1, description="With --compare-random: the target's vocabulary size (read from a local model "
        "if not given).")


@dataclass(frozen=True)
class RunSettings:
    """What `run` measures with: the file's sections with the flags over them, validated."""

    engine: EngineSpec
    spec: SpecConfig
    workload: WorkloadSpec
    load: LoadSpec


def run_settings(
    config_file: Path | None,
    cli_engine: dict[str, Any],
    cli_spec: str | None,
    cli_load: dict[str, Any],
    cli_workload: dict[str, Any] | None = None,
) -> RunSettings:
    """Merge a YAML config (sections engine/spec/workload/load) with CLI flags (flags win over the file, the file
    over the fields' defaults), then validate."""
    raw: dict[str, Any] = load_yaml(config_file) if config_file else {}
    where = str(config_file) if config_file else "command line"
    unknown = set(raw) - {"engine", "spec", "workload", "load"}
    if unknown:
        raise SpecmeterError(f"{where}: unknown top-level key {sorted(unknown)[0]!r}; use engine, spec, workload "
                             "and load")
    given = {"workload": cli_workload or {}, "load": cli_load, "engine": cli_engine}
    laid = sections_over(raw, given, where)
    workload, load, engine = laid.workload, laid.load, laid.engine
    if workload.lengths:  # named as it was given: the flag, else the file's key
        said = (f"--input-len {','.join(map(str, workload.lengths))}" if "input_len" in given["workload"] else
                f"{where}: workload.input_len {workload.lengths}")
        raise InputError(f"{said}: run keeps the dataset's prompts in a range (a sweep file's workload.input_len "
                         "makes lengths an axis); give LO:HI, e.g. 0:512")
    if load.search:
        said = "--concurrency auto" if "concurrency" in cli_load else f"{where}: load.{load.search[0].key} auto"
        raise InputError(f"{said}: run has no load search; give levels like 1,4,16 (`specmeter sweep` takes auto)")
    if cli_spec is not None:
        spec = parse_spec_json(cli_spec)
    else:
        spec = build_model(SpecConfig, raw.get("spec") or {}, f"{where}: spec")
    return RunSettings(engine, spec, workload, load)
