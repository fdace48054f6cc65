"""The `specmeter` command line: the commands registered in the order a user needs them, the old forms kept
(hidden, with a note) for one release, and the one place a SpecmeterError becomes its line and exit code."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError  # typer bundles its own click
from typer.core import TyperGroup
from typer.exceptions import Abort

from specmeter import __version__
from specmeter.cli import compare, plan, recommend, run, sweep, vocab
from specmeter.cli.args import console, err_console, note, terminal
from specmeter.cli.settings import settings, speaking
from specmeter.common.errors import SpecmeterError
from specmeter.config.preparation import Preparation

# The old `plan --hardware ...` (before any run) is `estimate` now; these flags tell it from `plan RUN`.
ESTIMATE_FLAGS = ("--hardware", "--gpu", "--target-config")


class Commands(TyperGroup):
    """Typer's group (commands listed in registration order), with the old `plan --hardware` sent to `estimate`."""

    # Any: the types are those of the click typer vendors, which it does not export.
    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        if args[:1] == ["plan"] and any(a.partition("=")[0] in ESTIMATE_FLAGS for a in args[1:]):
            note("specmeter plan --hardware ...", "specmeter estimate --hardware ...")
            args = ["estimate", *args[1:]]
        return super().resolve_command(ctx, args)


app = typer.Typer(
    name="specmeter",
    cls=Commands,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version() -> None:
    from specmeter.engines.registry import engine_kinds, get_engine

    engines = {kind: get_engine(kind).launcher.version() for kind in engine_kinds()}
    console.print(json.dumps({"specmeter": __version__, **engines}))


def _version(given: bool) -> None:
    if given:
        _print_version()
        raise typer.Exit()


@app.callback()
def specmeter(
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_version, help="Print specmeter's version and the engines installed here, as JSON.")] = False,
) -> None:
    """Measure speculative decoding on real serving engines (vLLM first) and say what to deploy.

    Start with `demo`: it measures, recommends and verifies on a tiny model pair.
    Measure: `run` one config, `sweep` many, `resume` an interrupted one.
    Decide: `recommend` a K per batch size from a sweep, `verify` it by running it.
    Read stored runs: `report` one, `compare` several (`--check` fails CI on a regression, `--pool` makes reruns
    of one plan one verdict).
    Predict: `plan` from measured runs, `estimate` before any run.
    Every command takes -q (the answer only), -v (everything) and --help."""


def version() -> None:
    """Old form of `specmeter --version`."""
    note("specmeter version", "specmeter --version")
    _print_version()


data_app = typer.Typer(help="Prepare a benchmark dataset, once, with network, before benchmarking.",
                       no_args_is_help=True)


@settings(Preparation, "asked", validate=True)
def data_prepare(
    asked: Preparation,
    dataset: Annotated[str, typer.Argument(help="Dataset to prepare: speed-bench.")],
    config: Annotated[str | None, typer.Option(hidden=True)] = None,
) -> None:
    """Download a hub dataset with `datasets`, fill or drop placeholder rows, write JSONL + manifest."""
    from specmeter.workflows.data import prepare_dataset

    subset = asked.subset
    if config is not None:
        note("specmeter data prepare --config NAME", "specmeter data prepare --subset NAME")
        subset = config
    prepare_dataset(dataset, subset, asked.revision, asked.out, asked.seed, terminal())


# The map, in the order a user needs it (typer lists commands as registered): at most 12 visible.
# Every command but the demo, data prepare, version and slurm-job can print one JSON document (--json).
for command, name in ((run.demo, "demo"), (run.run, "run"), (sweep.sweep, "sweep"), (run.resume, "resume"),
                      (recommend.recommend, "recommend"), (recommend.verify, "verify"), (compare.report, "report"),
                      (compare.compare, "compare"), (plan.plan, "plan"), (plan.estimate, "estimate"),
                      (vocab.vocab, "vocab")):
    app.command(name)(speaking(command, json=name != "demo"))
app.add_typer(data_app, name="data")
data_app.command("prepare")(speaking(data_prepare, json=False))
# Old forms, one release: each works as before and names its new form on stderr.
for old, name in ((run.compare_workloads, "compare-workloads"), (plan.calibrate, "calibrate"),
                  (compare.check, "check"), (version, "version"), (sweep.slurm_job, "slurm-job")):
    app.command(name, hidden=True)(speaking(old, json=name not in ("version", "slurm-job")))


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except SpecmeterError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise SystemExit(exc.exit_code) from None
    except NoArgsIsHelpError:  # `specmeter` (or a group) alone: its help was printed, as asked
        raise SystemExit(0) from None
    except ClickException as exc:  # typer's own word on a flag (a type, a bound, an unknown option): one line too
        where = exc.ctx.command_path if isinstance(exc, UsageError) and exc.ctx is not None else "specmeter"
        err_console.print(f"[bold red]error:[/] {exc.format_message()}; `{where} --help` lists what it takes",
                          highlight=False, soft_wrap=True)
        raise SystemExit(exc.exit_code) from None
    except Abort:
        raise SystemExit(130) from None
    if isinstance(code, int) and code:
        raise SystemExit(code)
