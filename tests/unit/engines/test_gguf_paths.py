"""A .gguf model path is a model: preflight accepts it, llama-server is launched with it as it is, and what needs
a Hugging Face model instead (a tokenizer, a config.json) says so in one line."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.data.shaping import load_tokenizer
from specmeter.engines.llamacpp import LlamaCppLauncher
from specmeter.engines.preflight import check_local_models
from specmeter.predict.model_shape import load_config
from specmeter.rundir.provenance import model_fingerprint

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def ggufs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """target.gguf, draft.gguf and a stand-in llama-server (no GPU) that writes its arguments to args.txt and fails
    to start, as a server that cannot load its model does."""
    binary = tmp_path / "llama-server"
    binary.write_text('#!/bin/sh\ncase "$1" in --version|--list-devices) exit 0 ;; esac\n'
                      f'echo "$@" > {tmp_path / "args.txt"}\necho "0.00.001.000 E stand-in: no model" >&2\nexit 1\n')
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("SPECMETER_LLAMA_SERVER", str(binary))
    for name in ("target.gguf", "draft.gguf"):
        (tmp_path / name).write_bytes(b"GGUF")
    return tmp_path


def _spec(draft: Path) -> SpecConfig:
    return SpecConfig.model_validate({"method": "draft_model", "model": str(draft), "num_speculative_tokens": 2})


def test_preflight_takes_gguf_files_and_the_command_uses_them_as_they_are(ggufs: Path) -> None:
    engine, spec = EngineSpec(kind="llamacpp", model=str(ggufs / "target.gguf")), _spec(ggufs / "draft.gguf")
    check_local_models(engine, spec)
    cmd = LlamaCppLauncher().server_command(engine, spec, 8080)
    assert cmd[cmd.index("-m") + 1] == str(ggufs / "target.gguf")
    assert cmd[cmd.index("--spec-draft-model") + 1] == str(ggufs / "draft.gguf")


@pytest.mark.parametrize(("target", "draft", "named"), [
    ("missing.gguf", "draft.gguf", "target model"), ("target.gguf", "missing.gguf", "draft model")])
def test_a_missing_gguf_is_named(ggufs: Path, target: str, draft: str, named: str) -> None:
    with pytest.raises(InputError, match=rf"{named} .*missing\.gguf does not exist; check the path to the \.gguf"):
        check_local_models(EngineSpec(kind="llamacpp", model=str(ggufs / target)), _spec(ggufs / draft))


def test_a_file_that_is_no_model_is_named(ggufs: Path) -> None:
    (ggufs / "weights.bin").write_bytes(b"x")
    with pytest.raises(InputError, match=r"is a file, not a model directory or a \.gguf file"):
        check_local_models(EngineSpec(kind="llamacpp", model=str(ggufs / "weights.bin")), SpecConfig())


def test_run_launches_llama_server_with_the_gguf_files(ggufs: Path) -> None:
    spec = json.dumps({"method": "draft_model", "model": str(ggufs / "draft.gguf"), "num_speculative_tokens": 2})
    subprocess.run([sys.executable, "-m", "specmeter.cli", "run", "--engine", "llamacpp", "--model",
                    str(ggufs / "target.gguf"), "--spec", spec, "--no-baseline", "--num-prompts", "1",
                    "--startup-timeout", "30", "--out", str(ggufs / "runs")],
                   capture_output=True, text=True, timeout=90, env={**os.environ, "NO_COLOR": "1"})
    args = (ggufs / "args.txt").read_text().split()  # the server was started: preflight let the paths through
    assert args[args.index("-m") + 1] == str(ggufs / "target.gguf")
    assert args[args.index("--spec-draft-model") + 1] == str(ggufs / "draft.gguf")


def test_a_gguf_is_fingerprinted_by_its_content(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    found = model_fingerprint(str(tmp_path / "m.gguf"))
    assert found is not None and found["path"] == str((tmp_path / "m.gguf").resolve()) and "m.gguf" in found["sha256"]


def test_what_needs_a_hugging_face_model_says_so(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"GGUF\x03\xff")
    with pytest.raises(InputError, match=r"\.gguf file: pass the model's Hugging Face directory or hub id as "
                                         r"--tokenizer"):
        load_tokenizer(str(tmp_path / "m.gguf"), "--input-len")
    with pytest.raises(InputError, match=r"a \.gguf file; the planner reads a Hugging Face config\.json"):
        load_config(tmp_path / "m.gguf")
