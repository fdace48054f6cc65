"""`specmeter estimate --hardware ...`: flags into the estimate's inputs, the acceptance forms it takes, what it
refuses, and a console rendering that calls itself an estimate in every title."""

from __future__ import annotations

import shlex
from contextlib import nullcontext
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from estimate_fixtures import LLAMA_8B, iid_al, write_config
from rich.console import Console
from typer.testing import CliRunner

from specmeter.cli import app
from specmeter.common.errors import InputError
from specmeter.config.prediction import Prediction
from specmeter.execution.runner import Reporter
from specmeter.predict.profiles import parse_acceptance
from specmeter.schemas.estimate import TITLE
from specmeter.workflows.estimate import build, estimate_before_run
from specmeter.workflows.terminal import Terminal

MODELS = Path(__file__).resolve().parents[3] / "models"
DEMO = Prediction(target_config=MODELS / "demo-target", draft_config=MODELS / "demo-draft", acceptance="0.7",
                  hardware="h100", ks=[1, 4], batches=[1, 16])


def changed(**fields: Any) -> Prediction:
    """The demo request with `fields` changed, validated again."""
    return Prediction.model_validate({**DEMO.model_dump(), **fields})


def terminal(json_out: bool = False) -> tuple[Terminal, StringIO]:
    out = StringIO()
    return Terminal(out=Console(file=out, width=200), err=Console(file=StringIO()), json_out=json_out,
                    progress=lambda _console: nullcontext(Reporter())), out


def test_every_table_on_the_console_says_it_is_an_estimate() -> None:
    term, out = terminal()
    result = estimate_before_run(DEMO, term)
    text = out.getvalue()
    assert text.startswith(TITLE.capitalize())
    titles = [line for line in text.splitlines() if line.strip() and line.strip()[0].isalpha()
              and "(" + TITLE + ")" in line]
    assert len(titles) == 4  # inputs, memory, speedup per batch and K, the best K in detail
    assert "Not modelled:" in text
    assert result.inputs.dtype == "bf16"  # the demo config holds bfloat16


def test_acceptance_forms() -> None:
    iid = parse_acceptance("0.7", 4)
    assert iid.al(4).al == pytest.approx(iid_al(0.7, 4))
    given = parse_acceptance("0.8,0.6,0.45", 4)
    assert given.al(3).al == pytest.approx(1 + 0.8 + 0.6 + 0.45)
    for bad, words in (("abc", "acceptance rate"), ("0.5,0.7", "cannot rise"), ("1.5", "[0, 1]"),
                       (None, "--acceptance")):
        with pytest.raises(InputError, match=words.replace("[", r"\[").replace("]", r"\]")):
            parse_acceptance(bad, 4)


def test_drafter_rules() -> None:
    inputs, _profile, _notes = build(changed(draft_config=None, method="ngram"))
    assert inputs.draft is None and inputs.method == "ngram"
    with pytest.raises(InputError, match="--draft-config"):
        build(changed(draft_config=None))
    with pytest.raises(InputError, match="leave out --draft-config"):
        build(changed(method="ngram"))
    with pytest.raises(InputError, match="--method 'mtp'"):
        build(changed(method="mtp"))
    with pytest.raises(InputError, match="exceeds --tp"):
        estimate_before_run(changed(draft_tp=2), terminal()[0])
    with pytest.raises(InputError, match="does not split over --tp 2"):  # the demo target has 9 heads
        estimate_before_run(changed(tp=2), terminal()[0])


def test_precision_and_hardware_flags(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no FP8"):
        estimate_before_run(changed(hardware="a100", dtype="fp8"), terminal()[0])
    fp8, _profile, _notes = build(changed(dtype="fp8"))
    assert (fp8.dtype, fp8.kv_dtype) == ("fp8", "bf16")  # vLLM's KV cache stays 16-bit unless asked
    f32 = write_config(tmp_path / "f32", {**LLAMA_8B, "torch_dtype": "float32"})
    inputs, _profile, notes = build(changed(target_config=f32, draft_config=None, method="ngram"))
    assert inputs.dtype == "bf16" and any("float32" in n for n in notes)
    mine = Prediction(gpu="bandwidth=1,tflops=100,memory=24", efficiency="compute=0.5,overhead_ms=0",
                      target_config=DEMO.target_config, method="ngram", acceptance="0.7")
    built, _profile, _notes = build(mine)
    assert (built.hardware.memory_bandwidth, built.hardware.name) == (1e12, "custom GPU")
    assert (built.efficiency.memory, built.efficiency.compute, built.efficiency.overhead_s) == (0.8, 0.5, 0.0)
    for gpu, words in (("bandwidth=1,tflops=100", "missing memory"), ("speed=3", "keys bandwidth"),
                       ("bandwidth=fast", "takes a number")):
        with pytest.raises(InputError, match=words):
            build(Prediction(gpu=gpu, target_config=DEMO.target_config, method="ngram", acceptance="0.7"))
    for flag, value in (("mem_fraction", 1.5), ("compute_efficiency", 0.0)):
        with pytest.raises(InputError, match="fraction"):
            build(changed(**{flag: value}))


def test_cli_estimate_needs_a_gpu_and_prints_an_estimate() -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["estimate", "--target-config", str(MODELS / "demo-target")])
    assert isinstance(res.exception, InputError) and "--hardware" in str(res.exception)
    res = runner.invoke(app, ["estimate", "--hardware", "h200", "--target-config", str(MODELS / "demo-target"),
                              "--method", "ngram", "--acceptance", "0.6", "--k", "2", "--batch", "1"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(TITLE.capitalize()) and "H200" in res.output


def test_the_readme_command_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one command "Before you rent" gives anyone, run from the repository root as the README shows it."""
    readme = (MODELS.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("### Before you rent", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    args = shlex.split(block.replace("\\\n", " "))
    assert args[:2] == ["specmeter", "estimate"]
    monkeypatch.chdir(MODELS.parent)
    res = CliRunner().invoke(app, args[1:])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(TITLE.capitalize())


def test_a_target_too_large_for_the_gpu_is_said_so(tmp_path: Path) -> None:
    """8B parameters in BF16 are 16 GB: on a GPU of 8 GB nothing fits, so no batch gets a best K."""
    target = write_config(tmp_path / "llama", LLAMA_8B)
    term, out = terminal()
    result = estimate_before_run(Prediction(gpu="bandwidth=1,tflops=100,memory=8", target_config=target,
                                            method="ngram", acceptance="0.7", batches=[1, 2]), term)
    assert result.memory.max_batch_without_draft == 0 and result.best == []
    assert not any(row.fits for row in result.rows) and "no room" in out.getvalue()


def test_acceptance_from_a_run_is_what_it_measured() -> None:
    """--acceptance RUN: the drafter's per-position rates as the stored demo run counted them (not given ones)."""
    stored = MODELS.parent / "tests" / "fixtures" / "runs" / "20261123-180233-demo"
    profile = parse_acceptance(str(stored), 4)
    assert profile.width >= 1 and all(steps > 0 for steps in profile.steps)
    inputs, _profile, _notes = build(changed(acceptance=str(stored)))
    assert inputs.acceptance_rates == list(profile.per_position)
