"""The command line as a map: at most 12 visible commands in the order a user needs them, one type per flag name
across every command, -q/-v everywhere, every old form still working with a note that names its new form, and
every malformed flag value refused in one line (exit 2, the flag named, no traceback). No server: the workflows
are replaced by recorders where a command would measure."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer.main
from command_tree import commands
from in_process import specmeter
from typer.testing import CliRunner

from specmeter.cli import app
from specmeter.common.errors import InputError
from specmeter.config import flag_text as parse
from specmeter.placement.inventory import parse_gpu_ids

MAP = ["demo", "run", "sweep", "resume", "recommend", "verify", "report", "compare", "plan", "estimate", "vocab",
       "data"]
STORED = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"
MODELS = Path(__file__).resolve().parents[3] / "models"


def test_the_map_lists_at_most_twelve_commands_in_the_order_a_user_needs_them() -> None:
    root = typer.main.get_command(app)
    visible = [name for name, command in root.commands.items() if not command.hidden]  # type: ignore[attr-defined]
    assert visible == MAP and len(visible) <= 12


def test_a_flag_name_has_one_type_and_multiplicity_across_commands() -> None:
    seen: dict[str, str] = {}
    where: dict[str, str] = {}
    for name, command in commands(typer.main.get_command(app)):
        if command.hidden:
            continue
        for param in command.params:
            if param.param_type_name != "option" or param.hidden:
                continue
            kind = str(param.type_descriptor.annotation)  # the value's type; list[...]: repeatable
            for flag in param.opts:
                assert seen.setdefault(flag, kind) == kind, f"{flag}: {kind} in {name}, {seen[flag]} in {where[flag]}"
                where.setdefault(flag, name)
    assert seen["--k"] == seen["--input-len"] == seen["--concurrency"] == "<class 'str'>"
    assert seen["--endpoint"] == seen["--spec"] == "list[str]"


def test_every_command_takes_quiet_and_verbose() -> None:
    for name, command in commands(typer.main.get_command(app)):
        flags = {flag for param in command.params for flag in param.opts}
        assert {"-q", "--quiet", "-v", "--verbose"} <= flags, name


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The workflows the commands under test call, replaced by recorders of what they were given."""
    from specmeter.workflows import data, demo, plan, recommend, report, resume, run, verify, vocab

    calls: dict[str, Any] = {}

    def record(name: str) -> Any:
        return lambda *args, **kwargs: calls.setdefault(name, args)

    for module, name in ((run, "run"), (resume, "resume"), (demo, "demo"), (verify, "verify"), (vocab, "vocab"),
                         (report, "report"), (recommend, "recommend"), (plan, "plan_pooled")):
        monkeypatch.setattr(module, name, record(name))
    monkeypatch.setattr(data, "prepare_dataset", record("prepare_dataset"))
    return calls


def invoke(*args: str) -> Any:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, (res.output, res.exception)
    return res


@pytest.mark.parametrize(("args", "old", "new", "workflow"), [
    (["compare-workloads", "--endpoint", "http://x"], "specmeter compare-workloads ...",
     "specmeter run --compare-random ...", "run"),
    (["run", "--resume", "r"], "specmeter run --resume RUN", "specmeter resume RUN", "resume"),
    (["sweep", "--resume", "r"], "specmeter sweep --resume RUN", "specmeter resume RUN", "resume"),
    (["demo", "--num-speculative-tokens", "3"], "specmeter demo --num-speculative-tokens K", "specmeter demo --k K",
     "demo"),
    (["verify", "r", "--until-stable"], "specmeter verify --until-stable", "specmeter verify --rounds N", "verify"),
    (["verify", "r", "--out", "v"], "specmeter verify --out DIR", "specmeter verify --verify-dir DIR", "verify"),
    (["vocab", "r", "--k", "3"], "specmeter vocab --k N", "specmeter vocab --positions N", "vocab"),
    (["vocab", "r", "--out", "v.json"], "specmeter vocab --out FILE", "specmeter vocab --vocab-json FILE", "vocab"),
    (["data", "prepare", "speed-bench", "--config", "all"], "specmeter data prepare --config NAME",
     "specmeter data prepare --subset NAME", "prepare_dataset"),
])
def test_an_old_form_works_and_names_its_new_form(recorded: dict[str, Any], args: list[str], old: str, new: str,
                                                 workflow: str) -> None:
    res = invoke(*args)
    assert res.stderr.startswith(f"note: '{old}' is now '{new}")
    assert workflow in recorded


def test_old_forms_reach_the_same_requests_as_the_new(recorded: dict[str, Any]) -> None:
    invoke("compare-workloads", "--endpoint", "http://x", "--vocab-size", "9")
    assert recorded["run"][0].compare_random and recorded["run"][0].vocab_size == 9
    invoke("demo", "--num-speculative-tokens", "3")
    assert recorded["demo"][0].ks == [3]
    invoke("verify", "r", "--until-stable", "--out", "v")
    request = recorded["verify"][1]
    assert request.rounds == 2 and request.verify_dir == Path("v")
    invoke("vocab", "r", "--k", "3", "--out", "v.json")
    assert recorded["vocab"][0].k == 3 and recorded["vocab"][0].out == Path("v.json")
    invoke("data", "prepare", "speed-bench", "--config", "all")
    assert recorded["prepare_dataset"][1] == "all"


def test_the_demo_takes_the_proposal_budget_and_range(recorded: dict[str, Any]) -> None:
    invoke("demo", "--propose", "0", "--propose-k", "1-6")
    assert recorded["demo"][0].tuning.propose == 0 and recorded["demo"][0].tuning.propose_k == (1, 6)


def test_verify_rounds_alone_sets_the_rounds(recorded: dict[str, Any]) -> None:
    invoke("verify", "r", "--rounds", "3", "--endpoint", "http://x")
    assert recorded["verify"][1].rounds == 3 and recorded["verify"][1].endpoint == "http://x"


@pytest.mark.parametrize(("flags", "verbosity"), [([], 0), (["-q"], -1), (["--verbose"], 1)])
def test_quiet_and_verbose_reach_the_terminal(recorded: dict[str, Any], flags: list[str], verbosity: int) -> None:
    invoke("report", "r", *flags)
    assert recorded["report"][2].verbosity == verbosity


def one_line_error(res: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2 and len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


@pytest.mark.parametrize(("args", "says"), [
    (["sweep", "--concurrency", "1,auto"], "--concurrency 1,auto: auto stands alone"),
    (["run", "--model", "m", "--concurrency", "auto"], "--concurrency auto: run has no load search"),
    (["sweep", "--k", "2,x"], "--k 2,x: 'x' is not a whole number; give draft lengths K like 1,2,4"),
    (["run", "--model", "m", "--input-len", "512"], "--input-len 512: run keeps the dataset's prompts in a range"),
    (["run", "--input-len", "9:3"], "--input-len 9:3: a range's LO is below its HI"),
    (["estimate", "--hardware", "h100", "--input-len", "0:512"], "--input-len 0:512: estimate takes one input length"),
    (["run", "--request-rate", "fast"], "--request-rate fast: not numbers"),
    (["run", "--engine-env", "NOEQUALS"], "--engine-env NOEQUALS: not KEY=VALUE"),
    (["run", "--spec", "{}", "--spec", "{}"], "--spec given 2 times"),
    (["compare", "a", "b", "--check", "--max-al-drop", "2"], "--max-al-drop 2: a bare number is a fraction"),
    (["compare", "a", "b", "--max-al-drop", "2%"], "--max-al-drop bound --check"),
    (["report", "r", "-q", "-v"], "-q/--quiet and -v/--verbose together"),
    (["sweep", "--model", "m", "--spec", '{"method": "ngram"}', "-k", "2", "--propose", "2"],
     "--propose measures the Ks the step-cost model proposes"),
    (["demo", "--propose-k", "6-1"], "--propose-k 6-1: K runs from 1, and LOW is at most HIGH"),
])
def test_a_malformed_flag_value_is_one_line_naming_the_flag(args: list[str], says: str) -> None:
    assert says in one_line_error(specmeter(*args))


def test_every_parser_raises_one_line_input_errors() -> None:
    for call in (lambda: parse.levels_or_auto("0"), lambda: parse.levels_or_auto("auto,4"), lambda: parse.ks(""),
                 lambda: parse.sizes("1,-2", "--batch", "1,8"), lambda: parse.rates("0"),
                 lambda: parse.input_len("1,1"), lambda: parse.input_len("a:b"), lambda: parse.one_length("1,2", "x"),
                 lambda: parse.pairs(["=v"], "--engine-env"), lambda: parse.options(["k"], "--dataset-option"),
                 lambda: parse.drop("150%", "--max-al-drop"), lambda: parse_gpu_ids("0,,1", "--gpus"),
                 lambda: parse.sbatch_options(["--mem=1"]), lambda: parse.once(["a", "b"], "--endpoint", "one"),
                 lambda: parse.k_range("2-x"), lambda: parse.k_range("0-3")):
        with pytest.raises(InputError) as err:
            call()
        assert "\n" not in str(err.value) and str(err.value).startswith("-")
    assert parse.input_len("128,512") == [128, 512] and parse.input_len("0:512") == (0, 512)
    assert parse.levels_or_auto(" auto ") == "auto" and parse.ks("1, 2,4") == [1, 2, 4]
    assert parse.k_range("1-6") == (1, 6) and parse.k_range("3") == (3, 3)


def test_the_old_plan_hardware_and_check_and_version_still_work(tmp_path: Path) -> None:
    res = specmeter("plan", "--hardware", "h200", "--target-config", MODELS / "demo-target", "--method", "ngram",
                    "--acceptance", "0.6", "--k", "2", "--batch", "1", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stderr.splitlines()[0] == ("note: 'specmeter plan --hardware ...' is now "
                                          "'specmeter estimate --hardware ...'")
    run, ref = shutil.copytree(STORED, tmp_path / "run"), shutil.copytree(STORED, tmp_path / "ref")
    res = specmeter("check", run, "--against", ref, "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stderr.splitlines()[0] == ("note: 'specmeter check RUN --against REF' is now "
                                          "'specmeter compare REF RUN --check'")
    old, new = specmeter("version"), specmeter("--version")
    assert old.returncode == new.returncode == 0 and old.stdout == new.stdout and '"specmeter"' in new.stdout
    assert old.stderr.strip() == "note: 'specmeter version' is now 'specmeter --version'"
