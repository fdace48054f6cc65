"""Bad input is rejected before any server starts, in one line that names the place and the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specmeter.common.errors import InputError

pytestmark = pytest.mark.timeout(120)
DEMO_TARGET = Path(__file__).resolve().parents[3] / "models" / "demo-target"


def specmeter(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specmeter.cli", *args], capture_output=True, text=True, timeout=60)


def one_line_error(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == InputError.exit_code, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error:")
    assert "Traceback" not in res.stderr
    return lines[0]


def fake_model(root: Path, name: str, vocab: int, tokenizer: str) -> Path:
    d = root / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "vocab_size": vocab}))
    (d / "tokenizer.json").write_text(tokenizer)
    return d


# Launch mode with a model path that does not exist is also caught before launch, so none of these
# cases can start a server even by mistake.
@pytest.mark.parametrize(
    ("args", "must_name"),
    [
        (["--spec", '{"method": "ngram", "num_speculative_tokens": -1}'], "num_speculative_tokens"),
        (["--spec", '{"method": "ngram", "num_speculative_tokens": 2, "lookahead": 3}'], "lookahead"),
        (["--spec", '{"method": "draft_model", "num_speculative_tokens": 2}'], "draft_model"),
        (["--spec", "{not json"], "--spec"),
        (["--spec", '{"method": "ngram", "num_speculative_tokens": 4, '
                    '"num_speculative_tokens_per_batch_size": [[2, 8, 4]]}'],
         "start at 1"),
        (["--concurrency", "0"], "concurrency"),
        (["--concurrency", "1,x"], "concurrency"),
        (["--max-error-rate", "2"], "max_error_rate"),
    ],
)
def test_rejected_flags(args: list[str], must_name: str, tmp_path: Path) -> None:
    res = specmeter("run", "--endpoint", "http://127.0.0.1:9", *args, "--out", str(tmp_path))
    if res.returncode == 2 and "Usage:" in res.stderr:  # typer's own parse error for a malformed flag value
        assert must_name in res.stderr
        return
    assert must_name in one_line_error(res)
    assert not any(tmp_path.iterdir()), "nothing may be written for rejected input"


def test_yaml_config_unknown_key_wrong_type_and_unsafe_tag(tmp_path: Path) -> None:
    cfg = tmp_path / "run.yaml"
    cfg.write_text("engine:\n  endpoint: http://127.0.0.1:9\n  modle: x\n")
    assert "modle" in one_line_error(specmeter("run", "--config", str(cfg)))
    cfg.write_text("engine:\n  endpoint: http://127.0.0.1:9\nload:\n  max_tokens: lots\n")
    assert "max_tokens" in one_line_error(specmeter("run", "--config", str(cfg)))
    cfg.write_text("engine: !!python/object/apply:os.system ['echo pwned']\n")
    line = one_line_error(specmeter("run", "--config", str(cfg)))
    assert str(cfg) in line


def test_malformed_dataset_row_names_file_and_line(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "fine"}\n{"prompt": 7}\n')
    line = one_line_error(specmeter("run", "--endpoint", "http://127.0.0.1:9", "--dataset", "jsonl",
                                    "--dataset-path", str(data), "--out", str(tmp_path / "runs")))
    assert "d.jsonl" in line and "line 2" in line and "prompt" in line
    assert not (tmp_path / "runs").exists()


def test_draft_with_another_tokenizer_is_rejected_before_launch(tmp_path: Path) -> None:
    target = fake_model(tmp_path, "target", 8192, '{"model": "a"}')
    for name, vocab, tok in (("draft-vocab", 4096, '{"model": "a"}'), ("draft-tok", 8192, '{"model": "b"}')):
        draft = fake_model(tmp_path, name, vocab, tok)
        spec = json.dumps({"method": "draft_model", "model": str(draft), "num_speculative_tokens": 3})
        line = one_line_error(specmeter("run", "--model", str(target), "--spec", spec, "--out", str(tmp_path / "runs")))
        assert "different tokenizer" in line and str(draft) in line
    assert not (tmp_path / "runs").exists()


def test_missing_model_path_is_rejected(tmp_path: Path) -> None:
    line = one_line_error(specmeter("run", "--model", str(tmp_path / "nope"), "--out", str(tmp_path)))
    assert "does not exist" in line


def test_an_endpoint_that_does_not_answer_is_named_before_any_run_directory(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    line = one_line_error(specmeter("run", "--endpoint", "http://127.0.0.1:9", "--num-prompts", "2", "--out", str(out)))
    assert "http://127.0.0.1:9 is unreachable" in line and "--endpoint" in line
    assert not out.exists() or not any(out.iterdir())


def test_an_unknown_engine_names_the_registered_ones(tmp_path: Path) -> None:
    line = one_line_error(specmeter("run", "--engine", "tgi", "--model", str(tmp_path), "--out", str(tmp_path)))
    assert "tgi" in line and all(kind in line for kind in ("vllm", "llamacpp", "sglang", "trtllm"))


def test_a_drafter_the_engine_lacks_is_refused_before_launch(tmp_path: Path) -> None:
    line = one_line_error(specmeter("run", "--engine", "llamacpp", "--model", str(DEMO_TARGET), "--spec",
                                    '{"method": "suffix", "num_speculative_tokens": 3}', "--out", str(tmp_path / "r")))
    assert "suffix" in line and "supports: draft_model, eagle3, mtp, ngram" in line
    assert not (tmp_path / "r").exists()


def test_llamacpp_without_its_server_names_the_setup_script(tmp_path: Path) -> None:
    env = {**os.environ, "SPECMETER_LLAMACPP_HOME": str(tmp_path / "none"), "PATH": "/usr/bin:/bin"}
    env.pop("SPECMETER_LLAMA_SERVER", None)
    res = subprocess.run([sys.executable, "-m", "specmeter.cli", "run", "--engine", "llamacpp", "--model",
                          str(DEMO_TARGET), "--out", str(tmp_path / "r")], capture_output=True, text=True,
                         timeout=60, env=env)
    assert "scripts/setup-llamacpp.sh" in one_line_error(res)
    assert not (tmp_path / "r").exists()
