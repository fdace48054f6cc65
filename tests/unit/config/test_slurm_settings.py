"""The Slurm settings are fields with their flags (config/slurm.py): `sweep --executor slurm` reaches the request as
SlurmOptions, sbatch options given as KEY=VALUE or KEY alone, and a Slurm setting without --executor slurm is one
line naming each flag given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from specmeter.cli import app
from specmeter.common.errors import InputError
from specmeter.config.slurm import Executor, SlurmOptions

SWEEP = ["sweep", "--model", "m", "--spec", '{"method": "ngram", "num_speculative_tokens": 2}']


def asked(monkeypatch: pytest.MonkeyPatch, *flags: str) -> Any:
    requests: list[Any] = []
    monkeypatch.setattr("specmeter.workflows.sweep.sweep", lambda req, term: requests.append(req))
    result = CliRunner().invoke(app, [*SWEEP, *flags])
    assert result.exit_code == 0, result.output
    return requests[0]


def test_the_slurm_flags_reach_the_request_as_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    req = asked(monkeypatch, "--executor", "slurm", "--partition", "cpu", "--time", "04:00:00", "--jobs", "drafter",
                "--gpus-per-job", "2", "--slurm-option", "mem=64G", "--slurm-option", "exclusive")
    assert req.slurm == SlurmOptions(partition="cpu", time="04:00:00", jobs="drafter", gpus_per_job=2,
                                     options={"mem": "64G", "exclusive": ""})


def test_without_the_slurm_executor_the_plan_runs_here(monkeypatch: pytest.MonkeyPatch) -> None:
    assert asked(monkeypatch).slurm is None
    assert Executor().slurm() is None and Executor(executor="slurm").slurm() == SlurmOptions()


@pytest.mark.parametrize(("given", "says"), [
    ({"partition": "cpu"}, "--partition applies to --executor slurm; add --executor slurm"),
    ({"executor": "local", "time": "1:00", "options": {"mem": "8G"}},
     "--time, --slurm-option apply to --executor slurm"),
])
def test_a_slurm_setting_here_is_refused_naming_its_flags(given: dict[str, Any], says: str) -> None:
    with pytest.raises(InputError, match=says):
        Executor.model_validate(given)


def test_a_malformed_sbatch_option_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [*SWEEP, "--executor", "slurm", "--slurm-option", "=x"])
    assert result.exit_code != 0
    assert isinstance(result.exception, InputError) and "--slurm-option =x" in str(result.exception)
