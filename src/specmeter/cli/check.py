"""The `specmeter check` command's flags: a run against a reference run of the same workload, failing (exit code 5)
where acceptance or speedup dropped by more than the bounds with confidence.

Beside cli/app.py, which registers it with the terminal it prints through. Thin like it: parse and call one workflow."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from specmeter.cli import parse as flags
from specmeter.errors import InputError
from specmeter.workflows.terminal import Terminal


def _drop(text: str, flag: str) -> float:
    try:
        return flags.drop(text)
    except ValueError as exc:
        raise InputError(f"{flag} {exc}") from None


def check_command(terminal: Callable[[bool], Terminal]) -> Callable[..., None]:
    """The command, printing through `terminal(json_out)`."""

    def check(
        run_dir: Annotated[Path, typer.Argument(help="The run to check (e.g. on the new engine version, drafter checkpoint or machine).")],
        against: Annotated[Path, typer.Option("--against", help="The reference run: the same workload, measured before.")],
        max_al_drop: Annotated[str, typer.Option(help="The largest drop in acceptance length allowed: a percentage (2%) or a fraction (0.02).")] = "2%",
        max_speedup_drop: Annotated[str, typer.Option(help="The largest drop in speedup over each run's own baseline allowed.")] = "3%",
        json_out: Annotated[bool, typer.Option("--json", help="Print the check as one JSON document (the exit code still says whether it regressed).")] = False,
    ) -> None:
        """Did acceptance or speedup drop from the --against run to RUN_DIR? Per configuration and load point both
        runs measured, AL and speedup with intervals, paired by request across the runs. Exits 5 naming each metric,
        configuration and point whose whole interval lies below 1 - its bound; refuses runs whose workloads differ
        (exit 2), saying what differs."""
        from specmeter.workflows.check import Bounds
        from specmeter.workflows.check import check as workflow

        bounds = Bounds(_drop(max_al_drop, "--max-al-drop"), _drop(max_speedup_drop, "--max-speedup-drop"))
        workflow(run_dir, against, bounds, terminal(json_out))

    return check
