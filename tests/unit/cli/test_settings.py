"""Settings declared once, on their model fields (config/flags.py, cli/settings.py): every option of every command
is made from a flagged field, with the field's description as its help, and a setting is one field; every flagged
LoadSpec, EngineSpec and WorkloadSpec field is an option of `run` and `sweep` (the demo, verify, estimate and vocab:
the ones they take); and a value given reaches the model the run measures with, over a file's."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

import pytest
import typer.main
from command_tree import commands
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from typer.testing import CliRunner

import specmeter.config
from specmeter.cli import app
from specmeter.cli import run as run_cli
from specmeter.common.errors import InputError
from specmeter.config.criteria import Criteria
from specmeter.config.flags import Flag, flagged
from specmeter.config.models import EngineSpec, LoadSpec
from specmeter.config.schedule import Schedule
from specmeter.config.tune import Tuning
from specmeter.config.workload import WorkloadSpec
from specmeter.plans.sweep import SweepSpec

LOAD = list(flagged(LoadSpec))
SETTINGS = [*LOAD, *flagged(EngineSpec), *flagged(WorkloadSpec), *flagged(Schedule)]  # run's and sweep's alike
MODELS = (LoadSpec, EngineSpec, WorkloadSpec, Schedule, Criteria, Tuning)  # every model a command takes flags from
INTO = {"load", "engine", "workload", "schedule", "criteria", "tuning"}  # the parameters their settings arrive in


def options(command: str) -> dict[str, Any]:
    """A command's options by flag, as the command line has them."""
    group: Any = typer.main.get_command(app)
    return {flag: param for param in group.commands[command].params for flag in param.opts}


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_run_and_sweep_take_every_load_and_engine_setting_with_its_fields_help(command: str) -> None:
    taken = options(command)
    for _name, info, flag in SETTINGS:
        assert flag.name in taken, f"{command} lacks {flag.name}"
        assert taken[flag.name].help == info.description


def test_the_demo_takes_its_load_settings_at_its_own_defaults() -> None:
    taken = options("demo")
    for name, default in run_cli.DEMO_LOAD.items():
        flag = next(f for n, _info, f in LOAD if n == name)
        assert taken[flag.name].default == default


def test_each_flag_is_one_field() -> None:
    flags = [flag.name for model in MODELS for _name, _info, flag in flagged(model)]
    assert len(flags) == len(set(flags)), sorted(f for f in flags if flags.count(f) > 1)


def test_no_setting_is_declared_again_in_the_command_line() -> None:
    """Wherever a command takes a flagged setting's flag, the option is the one made from its field."""
    names = {flag.name for model in MODELS for _name, _info, flag in flagged(model)}
    for name, command in commands(typer.main.get_command(app)):
        for param in command.params:
            if set(param.opts) & names:
                assert param.name.partition("__")[0] in INTO, f"{name} declares {param.opts} again"


def config_models() -> list[type[BaseModel]]:
    """Every model a flag is declared on: config's (each module of the package walked) and the sweep file's."""
    found: dict[str, type[BaseModel]] = {}
    for module in pkgutil.iter_modules(specmeter.config.__path__):
        loaded = importlib.import_module(f"specmeter.config.{module.name}")
        for value in vars(loaded).values():
            if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == loaded.__name__:
                found[value.__qualname__] = value
    return [*found.values(), SweepSpec]


def declared(model: type[BaseModel]) -> list[tuple[str, FieldInfo, Flag]]:
    """The flagged fields the model declares itself (not those it inherits)."""
    own = {name for name in model.__annotations__} if "__annotations__" in vars(model) else set()
    return [(name, info, flag) for name, info, flag in flagged(model) if name in own]


def visible_options() -> list[tuple[str, Any]]:
    """Every visible option of every visible command, with the command's name; --help aside."""
    group: Any = typer.main.get_command(app)
    out = []
    for path, command in commands(group):
        if not command.hidden:
            out += [(path, p) for p in command.params
                    if p.param_type_name == "option" and not p.hidden and p.name != "help"]
    return out


def test_every_option_of_every_command_is_made_from_a_model_field() -> None:
    """No command declares an option by hand: each visible one is a flagged field's, with its description as help."""
    fields = {(flag.name, info.description) for model in config_models() for _n, info, flag in declared(model)}
    for command, option in visible_options():
        flag = next(o for o in option.opts if o.startswith("--"))
        assert (flag, option.help) in fields, f"{command} {flag}: an option not made from a model field"
        assert "__" in option.name, f"{command} {flag}: declared in the command, not made by settings()"


def test_each_setting_is_declared_on_exactly_one_field() -> None:
    """A setting is one field: no flag is declared on two models with the same meaning (the same help), and the
    commands that share a flag share its field."""
    declarations = [(flag.name, info.description) for model in config_models() for _n, info, flag in declared(model)]
    assert len(declarations) == len(set(declarations)), sorted(d for d in declarations if declarations.count(d) > 1)
    helps: dict[str, set[str | None]] = {}
    for _command, option in visible_options():
        helps.setdefault(option.opts[0], set()).add(option.help)
    shared = {"--out", "--seed"}  # data prepare's output directory and seed: settings of their own
    assert {flag for flag, texts in helps.items() if len(texts) > 1} <= shared


def test_a_flag_reaches_the_run_and_the_sweep_over_their_files(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    asked: dict[str, Any] = {}
    monkeypatch.setattr("specmeter.workflows.run.run", lambda req, term: asked.setdefault("run", req))
    monkeypatch.setattr("specmeter.workflows.sweep.sweep", lambda req, term: asked.setdefault("sweep", req))
    (tmp_path / "sweep.yaml").write_text(
        "engine: {model: m}\ncandidates: [{method: ngram, num_speculative_tokens: 2}]\n"
        "workload: {dataset: sample, num_prompts: 5, categories: [coding]}\n"
        "load: {concurrency: [1], temperature: 0.5, warmup: 1}\n")
    runner = CliRunner()
    for argv in (["run", "--model", "m", "--temperature", "0.7", "--no-stop-at-saturation", "--duration", "3",
                  "--engine-env", "A=1", "--engine-env", "B=2"],
                 ["sweep", str(tmp_path / "sweep.yaml"), "--temperature", "0.7", "--no-stop-at-saturation",
                  "--num-prompts", "7", "--dtype", "bfloat16", "--engine-env", "A=1", "--dataset-option", "n=3",
                  "--tokenizer", "t"]):
        result = runner.invoke(app, argv)
        assert result.exit_code == 0, result.output
    run_load = asked["run"].settings.load  # resolved and validated before the workflow runs
    assert run_load.temperature == 0.7 and run_load.stop_at_saturation is False and run_load.duration_s == 3
    assert run_load.warmup == LoadSpec().warmup  # not given: the field's default holds
    run_engine = asked["run"].settings.engine
    assert run_engine.model == "m" and run_engine.env == {"A": "1", "B": "2"}  # KEY=VALUE items, as the field takes
    spec = asked["sweep"].spec  # resolved and validated before the workflow runs
    assert spec.load.temperature == 0.7 and not spec.load.stop_at_saturation  # the flags over the file
    assert spec.load.warmup == 1  # the file's, where no flag was given
    assert spec.load.num_prompts == 7 and spec.workload.num_prompts is None  # over workload.num_prompts too
    assert spec.engine.model == "m" and spec.engine.dtype == "bfloat16" and spec.engine.env == {"A": "1"}
    assert spec.workload.options == {"n": 3} and spec.workload.tokenizer == "t"  # JSON values, as the field takes
    assert spec.workload.categories == ["coding"]  # the file's, where no flag was given


def test_run_and_sweep_shape_request_rate_points_alike(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--arrival, --burstiness and --max-concurrency are options of both, one declaration each; beside a sweep file
    they shape each of its request-rate points."""
    for flag in ("--arrival", "--burstiness", "--max-concurrency"):
        assert options("run")[flag].help == options("sweep")[flag].help
    asked: dict[str, Any] = {}
    monkeypatch.setattr("specmeter.workflows.sweep.sweep", lambda req, term: asked.setdefault("sweep", req))
    (tmp_path / "sweep.yaml").write_text("engine: {model: m}\ncandidates: [{method: ngram, num_speculative_tokens: 2}]"
                                         "\nload: {concurrency: [1], request_rate: [2]}\n")
    result = CliRunner().invoke(app, ["sweep", str(tmp_path / "sweep.yaml"), "--arrival", "gamma", "--burstiness",
                                      "0.5", "--max-concurrency", "4"])
    assert result.exit_code == 0, result.output
    assert [p.id for p in asked["sweep"].spec.load.points] == ["c1", "r2-gamma0.5-cap4"]


def test_a_wrong_value_is_refused_by_the_field_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--model", "m", "--warmup", "-1", "--out", str(tmp_path)])
    assert isinstance(result.exception, InputError)  # main() prints it as its one line, exit 2
    assert "'warmup'" in str(result.exception) and ">= 0" in str(result.exception)


def test_top_p_is_one_field_from_the_command_line_to_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The setting added as one field: an option of run and sweep, validated by the field, sent by the client."""
    from specmeter.data.model import Conversation
    from specmeter.load.requests import build_request

    assert "--top-p" in options("run") and "--top-p" in options("sweep")
    asked: dict[str, Any] = {}
    monkeypatch.setattr("specmeter.workflows.run.run", lambda req, term: asked.setdefault("run", req))
    assert CliRunner().invoke(app, ["run", "--model", "m", "--top-p", "0.9"]).exit_code == 0
    from specmeter.config.run import run_settings

    load = asked["run"].settings.load
    assert load.top_p == 0.9
    assert build_request(Conversation(id="c", turns=["hi"]), 0, [], load, "m").body["top_p"] == 0.9
    with pytest.raises(InputError, match="top_p"):
        run_settings(None, {"model": "m"}, None, {"top_p": 1.5})


def test_load_points_given_as_flags_replace_the_files_in_run_and_sweep(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    """--concurrency is one field's flag (LoadSpec's shorthand): its text read once at the command line, the points
    made by the model; over a file, the points given replace the file's, in run and sweep alike, and auto (a load
    search) interleaves the sweep as the file's own would."""

    asked: dict[str, Any] = {}
    monkeypatch.setattr("specmeter.workflows.run.run", lambda req, term: asked.setdefault("run", req))
    monkeypatch.setattr("specmeter.workflows.sweep.sweep", lambda req, term: asked.setdefault("sweep", req))
    (tmp_path / "run.yaml").write_text("engine: {model: m}\nload: {points: [{rate: 2}]}\n")
    (tmp_path / "sweep.yaml").write_text("engine: {model: m}\ncandidates: [{method: ngram, num_speculative_tokens: 2}]"
                                         "\nload: {concurrency: [1, 2]}\n")
    runner = CliRunner()
    assert runner.invoke(app, ["run", "--config", str(tmp_path / "run.yaml"), "--concurrency", "2,8"]).exit_code == 0
    assert runner.invoke(app, ["sweep", str(tmp_path / "sweep.yaml"), "--concurrency", "auto"]).exit_code == 0
    assert [p.id for p in asked["run"].settings.load.points] == ["c2", "c8"]
    spec = asked["sweep"].spec
    assert [s.axis for s in spec.load.search] == ["concurrency"] and spec.interleave
    assert [p.id for p in spec.load.points] == ["c1", "c8", "c64"]  # the search's start points, not the file's


def test_a_load_search_is_refused_where_the_command_has_none(tmp_path: Path) -> None:
    from specmeter.config.run import run_settings

    with pytest.raises(InputError, match=r"^--concurrency auto: run has no load search"):
        run_settings(None, {"model": "m"}, None, {"concurrency": "auto"})
    (tmp_path / "run.yaml").write_text("engine: {model: m}\nload: {concurrency: auto}\n")
    with pytest.raises(InputError, match=r"run.yaml: load.concurrency auto: run has no load search"):
        run_settings(tmp_path / "run.yaml", {}, None, {})
    result = CliRunner().invoke(app, ["demo", "--concurrency", "auto", "--out", str(tmp_path)])
    assert isinstance(result.exception, InputError) and "demo has no load search" in str(result.exception)


def test_top_k_is_one_field_from_the_command_line_and_the_file_to_the_request(tmp_path: Path) -> None:
    """A load setting added as one field: a file key and a flag of run and sweep (flag over file), its help the
    field's, refused out of bounds naming the key, sent by the client, and compared between runs."""
    from specmeter.analysis.compare import LOAD_FIELDS
    from specmeter.config.run import run_settings
    from specmeter.data.model import Conversation
    from specmeter.load.requests import build_request

    described = LoadSpec.model_fields["top_k"].description
    assert options("run")["--top-k"].help == options("sweep")["--top-k"].help == described
    (tmp_path / "run.yaml").write_text("engine: {model: m}\nload: {top_k: 20}\n")
    assert run_settings(tmp_path / "run.yaml", {}, None, {}).load.top_k == 20
    load = run_settings(tmp_path / "run.yaml", {}, None, {"top_k": 5}).load
    assert build_request(Conversation(id="c", turns=["hi"]), 0, [], load, "m").body["top_k"] == 5
    assert "top_k" not in build_request(Conversation(id="c", turns=["hi"]), 0, [], LoadSpec(), "m").body
    assert "top_k" in LOAD_FIELDS  # two runs sampled differently are not the same workload
    with pytest.raises(InputError, match="top_k"):
        run_settings(None, {"model": "m"}, None, {"top_k": 0})


def test_run_and_sweep_both_take_the_baseline_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """One field (config/endpoints.py BaselineServer): run's flag, and a sweep's, over its file's key."""
    asked: dict[str, Any] = {}
    monkeypatch.setattr("specmeter.workflows.run.run", lambda req, term: asked.setdefault("run", req))
    monkeypatch.setattr("specmeter.workflows.sweep.sweep", lambda req, term: asked.setdefault("sweep", req))
    base, spec = "http://127.0.0.1:9", '{"method": "ngram", "num_speculative_tokens": 2, "endpoint": "http://h:1"}'
    for argv in (["run", "--endpoint", "http://h:1", "--baseline-endpoint", base],
                 ["sweep", "--model", "m", "--spec", spec, "--baseline-endpoint", base]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, result.output
    assert asked["run"].baseline_endpoint == base
    assert asked["sweep"].spec.baseline_endpoint == base
