"""What a command puts out: where a measuring command (run, sweep, the demo) writes the new run directory it makes,
how every command prints, and the files `report` writes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, model_validator

from specmeter.common.errors import InputError
from specmeter.config.flags import Flag
from specmeter.config.points import StrictModel


class RunOutput(StrictModel):
    """The run directory's parent and, where given, its name."""

    out: Annotated[Path, Flag("--out")] = Field(
        default=Path("runs"), description="Directory that receives the new run directory.")
    name: Annotated[str | None, Flag("--name")] = Field(
        default=None, description="Run directory name (default: timestamp + label).")


class Printing(StrictModel):
    """How a command prints: its tables (with -q the answer only, with -v every table and note), or one JSON
    document."""

    json_out: Annotated[bool, Flag("--json", negatable=False)] = Field(
        default=False, description="Print one JSON document to stdout instead of tables (notes go to stderr).")
    quiet: Annotated[bool, Flag("--quiet", short="-q", negatable=False)] = Field(
        default=False, description="Print the answer and errors only.")
    verbose: Annotated[bool, Flag("--verbose", short="-v", negatable=False)] = Field(
        default=False, description="Print every table and per-point note.")

    @model_validator(mode="after")
    def _one_verbosity(self) -> Printing:
        if self.quiet and self.verbose:
            raise InputError("-q/--quiet and -v/--verbose together: give one (-q: the answer and errors only; -v: "
                             "every table and note)")
        return self

    @property
    def verbosity(self) -> int:
        """Terminal.verbosity: -1 (quiet), 0 or 1 (verbose)."""
        return -1 if self.quiet else 1 if self.verbose else 0


def check_output_dir(flag: str, dest: Path | None) -> None:
    """A directory to write files into must not be a file already."""
    if dest is not None and dest.exists() and not dest.is_dir():
        raise InputError(f"{flag} {dest}: that is a file; give a directory to write into, e.g. {flag} "
                         f"{dest.with_name(dest.stem + '-' + flag.removeprefix('--'))}")


class ReportFiles(StrictModel):
    """Where `report` (and `compare`, its plots) writes a run as files (None: not that kind); refused before
    anything is read, recomputed or written."""

    html: Annotated[Path | None, Flag("--html")] = Field(
        default=None, description="Write the one-file HTML report here (plots inlined, works offline).")
    csv: Annotated[Path | None, Flag("--csv")] = Field(
        default=None, description="Write requests.csv, points.csv, speedups.csv (and recommendation.csv) into this "
        "directory.")
    plots: Annotated[Path | None, Flag("--plots")] = Field(
        default=None, description="Write the plots (PNG and SVG) into this directory.")
    profiles: Annotated[Path | None, Flag("--profiles")] = Field(
        default=None, description="Write the measured acceptance, per configuration and category, as the inputs of "
        "the simulators BLIS, AIConfigurator, specdec_bench (speculation_profile.json) and Dynamo's mocker, and as "
        "specmeter's planner profile, into this directory.")

    @model_validator(mode="after")
    def _writable(self) -> ReportFiles:
        if self.html is not None and self.html.is_dir():
            raise InputError(f"--html {self.html}: that is a directory; give the file to write, e.g. "
                             f"--html {self.html / 'report.html'}")
        for flag, dest in (("--csv", self.csv), ("--plots", self.plots), ("--profiles", self.profiles)):
            check_output_dir(flag, dest)
        return self


class Rereading(ReportFiles):
    """What `report` is asked: its files, and whether it first derives the stored results again."""

    recompute: Annotated[bool, Flag("--recompute", negatable=False)] = Field(
        default=False, description="First derive every point's metrics and the run's decisions again from the stored "
        "captures and requests (summary.json is rewritten; recommendation.json is kept).")
