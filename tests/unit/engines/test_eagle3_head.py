"""The committed EAGLE-3 head (models/demo-eagle3) as specmeter's own paths read it: preflight takes it for
demo-target and refuses it for another target, the shape reader counts exactly its weights, its d2t is the draft
vocabulary `specmeter vocab` reads, and the vLLM launch names it as the eagle3 drafter."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig, SpecMethod
from specmeter.data.vocab_map import read_vocab_map
from specmeter.engines.preflight import check_local_models
from specmeter.engines.vllm import VLLMLauncher
from specmeter.predict.model_shape import detect_method, read_shape

MODELS = Path(__file__).resolve().parents[3] / "models"
TARGET, HEAD = MODELS / "demo-target", MODELS / "demo-eagle3"


def _config(path: Path) -> dict[str, object]:
    cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    assert isinstance(cfg, dict)
    return cfg


def _spec(head: Path) -> SpecConfig:
    return SpecConfig(method=SpecMethod.eagle3, num_speculative_tokens=3, draft_model=str(head))


def _weights(path: Path) -> dict[str, tuple[str, list[int]]]:
    """Tensor name -> (dtype, shape), from the safetensors header."""
    with (path / "model.safetensors").open("rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(length))
    return {name: (info["dtype"], info["shape"]) for name, info in header.items() if name != "__metadata__"}


def test_the_head_is_what_vllm_loads_as_an_eagle3_llama_head() -> None:
    cfg, target = _config(HEAD), _config(TARGET)
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["num_hidden_layers"] == 1
    assert cfg["vocab_size"] == target["vocab_size"] and cfg["hidden_size"] == target["hidden_size"]
    h, draft_vocab = int(str(cfg["hidden_size"])), int(str(cfg["draft_vocab_size"]))
    weights = _weights(HEAD)
    assert weights["fc.weight"] == ("BF16", [h, 3 * h])
    assert weights["midlayer.self_attn.q_proj.weight"][1] == [h, 2 * h]  # embedding and hidden state in
    assert weights["lm_head.weight"] == ("BF16", [draft_vocab, h])
    assert weights["d2t"] == ("I64", [draft_vocab]) and weights["t2d"] == ("BOOL", [target["vocab_size"]])
    assert not any("embed_tokens" in name for name in weights)  # vLLM shares the target's


def test_preflight_takes_the_head_for_its_target() -> None:
    check_local_models(EngineSpec(kind="vllm", model=str(TARGET)), _spec(HEAD))


@pytest.mark.parametrize(("change", "named"), [
    ({"vocab_size": 32000}, "vocab_size 32000"),
    ({"hidden_size": 4096, "target_hidden_size": 4096}, "hidden states of size 4096"),
    ({"draft_vocab_size": 9000}, "draft_vocab_size 9000"),
])
def test_preflight_refuses_a_head_made_for_another_target(tmp_path: Path, change: dict[str, int],
                                                           named: str) -> None:
    other = tmp_path / "head"
    shutil.copytree(HEAD, other)
    (other / "config.json").write_text(json.dumps({**_config(HEAD), **change}), encoding="utf-8")
    with pytest.raises(InputError, match=f"EAGLE-3 head {other} does not fit target .*{named}"):
        check_local_models(EngineSpec(kind="vllm", model=str(TARGET)), _spec(other))


def test_the_shape_reader_counts_exactly_the_heads_weights() -> None:
    assert detect_method(HEAD) == "eagle3"
    head = read_shape(HEAD, "draft model", "eagle3", read_shape(TARGET))
    assert head.role == "EAGLE-3 head" and head.layers == 1
    assert any(f"lm_head over {_config(HEAD)['draft_vocab_size']} tokens" in n for n in head.notes)
    # The draft-vocabulary maps are no parameters: the file's weights are exactly what the shapes count.
    assert head.checkpoint_params == head.params


def test_the_heads_d2t_is_its_draft_vocabulary() -> None:
    vocab_size = int(str(_config(TARGET)["vocab_size"]))
    vocab = read_vocab_map(HEAD, vocab_size)
    assert vocab.kind == "d2t" and vocab.size == _config(HEAD)["draft_vocab_size"] and not vocab.notes
    assert int(vocab.ids[-1]) < vocab_size
    # It can end a reply: the target's eos is a token the head drafts.
    assert vocab.mask(vocab_size)[int(str(_config(TARGET)["eos_token_id"]))]


def test_the_vllm_launch_names_the_head_as_the_eagle3_drafter() -> None:
    cmd = VLLMLauncher().server_command(EngineSpec(kind="vllm", model=str(TARGET)), _spec(HEAD), 8000)
    config = json.loads(cmd[cmd.index("--speculative-config") + 1])
    assert config == {"method": "eagle3", "num_speculative_tokens": 3, "model": str(HEAD)}
