"""vLLM's suffix decoding: its package checked in the server's environment before anything starts, and its cache of
past responses off unless asked for (specmeter replays the same requests, which that cache would answer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specmeter.cli import app
from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig, SpecMethod
from specmeter.engines import vllm
from specmeter.engines.preflight import check_local_models, launch_notes
from specmeter.engines.vllm import SUFFIX_CACHE, VLLMLauncher, speculative_config

SUFFIX = SpecConfig(method=SpecMethod.suffix, num_speculative_tokens=4)
CACHED = SpecConfig(method=SpecMethod.suffix, num_speculative_tokens=4, extra={SUFFIX_CACHE: 10000})


def _package(root: Path, body: str) -> Path:
    """A directory holding an `arctic_inference.suffix_decoding` whose import runs `body`."""
    pkg = root / "arctic_inference" / "suffix_decoding"
    pkg.mkdir(parents=True)
    (root / "arctic_inference" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text(body)
    return root


def test_the_cache_of_past_responses_is_off_unless_asked_for() -> None:
    assert speculative_config(SUFFIX) == {"method": "suffix", "num_speculative_tokens": 4, SUFFIX_CACHE: 0}
    assert speculative_config(CACHED)[SUFFIX_CACHE] == 10000
    assert SUFFIX_CACHE not in speculative_config(SpecConfig(method=SpecMethod.ngram, num_speculative_tokens=4))
    argv = VLLMLauncher().server_command(EngineSpec(model="m"), SUFFIX, 8000)
    assert json.loads(argv[argv.index("--speculative-config") + 1])[SUFFIX_CACHE] == 0


def test_a_cache_asked_for_is_noted_as_inflated_by_the_replays() -> None:
    (note,) = VLLMLauncher().notes(CACHED)
    assert SUFFIX_CACHE in note and "inflated" in note
    assert VLLMLauncher().notes(SUFFIX) == []
    assert VLLMLauncher().notes(SUFFIX.model_copy(update={"extra": {SUFFIX_CACHE: 0}})) == []


def test_deployed_as_measured_with_a_note_on_the_default() -> None:
    dynamic = SUFFIX.model_copy(update={"num_speculative_tokens_per_batch_size": [(1, 4, 4), (5, 64, 0)]})
    for spec in (SUFFIX, dynamic):
        deploy = VLLMLauncher().deploy_spec(spec, 8)
        assert deploy.config[SUFFIX_CACHE] == 0 and f'"{SUFFIX_CACHE}": 0' in deploy.flags[1]
        (note,) = deploy.notes
        assert "as measured" in note and "10000" in note
    deploy = VLLMLauncher().deploy_spec(CACHED, 8)
    assert deploy.config[SUFFIX_CACHE] == 10000 and deploy.notes == []


def test_a_server_without_the_package_is_refused_naming_the_setup(tmp_path: Path) -> None:
    broken = _package(tmp_path / "broken", "raise ImportError('no _C')")
    engine = EngineSpec(model="org/target", env={"PYTHONPATH": str(broken)})
    with pytest.raises(InputError) as err:
        check_local_models(engine, SUFFIX)
    (line,) = str(err.value).splitlines()
    assert "arctic-inference" in line and "scripts/setup-suffix.sh" in line


def test_the_package_is_looked_for_in_the_servers_environment(tmp_path: Path) -> None:
    """PYTHONPATH in the engine's env reaches the server, so it reaches the check too."""
    found = _package(tmp_path / "found", "")
    engine = EngineSpec(model="org/target", env={"PYTHONPATH": str(found)})
    check_local_models(engine, SUFFIX)
    assert launch_notes(engine, SUFFIX) == []


def test_other_drafters_never_look_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(env: dict[str, str]) -> bool:
        raise AssertionError("looked for suffix decoding's package")

    monkeypatch.setattr(vllm, "suffix_module_importable", fail)
    check_local_models(EngineSpec(model="org/target"), SpecConfig(method=SpecMethod.ngram, num_speculative_tokens=3))
    check_local_models(EngineSpec(model="org/target"), SpecConfig())


def test_a_sweep_notes_the_cache_once(tmp_path: Path) -> None:
    found = _package(tmp_path / "found", "")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"engine: {{model: org/target, env: {{PYTHONPATH: {found}}}}}\n"
                     "candidates:\n"
                     f"  - {{method: suffix, num_speculative_tokens: [2, 4], extra: {{{SUFFIX_CACHE}: 500}}}}\n")
    res = CliRunner().invoke(app, ["sweep", str(sweep), "--dry-run", "--out", str(tmp_path / "unused")],
                             env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    assert res.output.count(f"{SUFFIX_CACHE}: 500") == 1
