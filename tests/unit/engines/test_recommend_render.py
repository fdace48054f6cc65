"""An engine-neutral recommendation rendered per engine (engines/deploy.py and each launcher's deploy_spec),
the drafter families it is built from, the slot count of a llama.cpp run, and verify's refusal of an engine
without a per-batch K."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_recommend import BATCHES, CLEAR, sweep

from specmeter.analysis.families import families
from specmeter.analysis.recommend import recommend
from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines.deploy import sweep_engine, with_deploy_configs
from specmeter.engines.llamacpp import LlamaCppLauncher, speculative_args
from specmeter.engines.registry import get_engine
from specmeter.plans.verify import verify_plan
from specmeter.report.recommendation import deploy_lines
from specmeter.schemas.plan import PlannedConfig, Role
from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.results import RunSummary

ROOT = Path(__file__).resolve().parents[3]
TARGET, DRAFT = ROOT / "models" / "demo-target", ROOT / "models" / "demo-draft"
FIXTURE = ROOT / "tests" / "fixtures" / "runs" / "20261123-180233-demo" / "recommendation.json"


def spec(k: int, **kw: object) -> SpecConfig:
    return SpecConfig.model_validate({"method": "draft_model", "num_speculative_tokens": k,
                                      "draft_model": str(DRAFT), **kw})


def on_engine(summary: RunSummary, kind: str, command: list[str] | None = None) -> RunSummary:
    """The sweep as if `kind` ran it: every configuration's engine, and (given) each server's command."""
    for config in summary.plan.configs:
        config.engine = config.engine.model_copy(update={"kind": kind})
    for res in summary.configs:
        res.server_command = command
        res.batch_limit = get_engine(kind).launcher.batch_limit(command or [])  # as the runner records it
    return summary


def llamacpp_sweep(slots: list[str], extras: dict[int, str] | None = None) -> tuple[RunSummary, Recommendation]:
    """CLEAR run on llama-server launched with `slots` (its -np arguments); `extras`: spec_draft_p_min per K."""
    specs = {f"draft_model-k{k}": spec(k, extra={"spec_draft_p_min": p}) for k, p in (extras or {}).items()}
    summary, records = sweep(CLEAR, BATCHES, max_num_seqs=None, extra_specs=specs or None)
    summary = on_engine(summary, "llamacpp", ["llama-server", "-m", "t.gguf", "--metrics", *slots])
    return summary, recommend(summary, records)


def vllm_parses(flags: list[str]) -> Any:
    """vLLM's own reading of pasted server flags: its CLI parser, then its SpeculativeConfig against the target."""
    arg_utils = pytest.importorskip("vllm.engine.arg_utils")
    from vllm.config import ParallelConfig
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = arg_utils.EngineArgs.add_cli_args(FlexibleArgumentParser())
    args = arg_utils.EngineArgs.from_cli_args(parser.parse_args(["--model", str(TARGET), *flags]))
    return args.create_speculative_config(args.create_model_config(), ParallelConfig())


def test_vllm_gets_the_table_and_the_static_k_as_speculative_config_that_vllm_accepts() -> None:
    summary, records = sweep(CLEAR, BATCHES, extra_specs={"draft_model-k2": spec(2), "draft_model-k4": spec(4)})
    rec = with_deploy_configs(recommend(summary, records), sweep_engine(summary.plan))
    best = rec.best
    assert best is not None and best.spec is not None
    assert best.deploy is not None and best.deploy.dynamic and best.deploy.engine == "vllm"
    table = [list(r) for r in best.spec.num_speculative_tokens_per_batch_size or []]
    assert best.deploy.flags == ["--speculative-config", json.dumps(best.deploy.config)]
    assert best.deploy.config == best.speculative_config  # the field earlier readers know
    assert best.deploy.config is not None and best.deploy.config["num_speculative_tokens_per_batch_size"] == table
    assert best.static_deploy is not None and not best.static_deploy.dynamic
    assert best.static_deploy.k == best.static_k and best.static_deploy.config == best.static_speculative_config
    dynamic = vllm_parses(best.deploy.flags)
    assert [list(r) for r in dynamic.num_speculative_tokens_per_batch_size] == table
    static = vllm_parses(best.static_deploy.flags)
    assert static.num_speculative_tokens == best.static_k and static.num_speculative_tokens_per_batch_size is None


def test_llamacpp_gets_its_static_k_with_the_slots_the_table_assumed() -> None:
    # Extra arguments come after specmeter's -np: llama-server takes the last.
    summary, neutral = llamacpp_sweep(["-np", "16", "-c", "32768", "--parallel", "12"])
    assert (neutral.max_num_seqs, neutral.max_num_seqs_source) == (12, "the launched server's command")
    assert neutral.best is not None and neutral.best.deploy is None  # analysis renders nothing
    rec = with_deploy_configs(neutral, sweep_engine(summary.plan))
    best = rec.best
    assert best is not None and best.static_spec is not None and best.static_k > 0
    assert best.spec is not None  # the table exists, as evidence; llama.cpp cannot take it
    assert best.deploy is not None and best.deploy.engine == "llamacpp" and not best.deploy.dynamic
    assert best.deploy.k == best.static_k
    assert best.deploy.flags == [*speculative_args(best.static_spec, best.static_spec.draft_model), "-np", "12"]
    assert best.deploy.flags[:2] == ["--spec-type", "draft-simple"]
    i = best.deploy.flags.index("--spec-draft-n-max")
    assert best.deploy.flags[i:i + 4] == ["--spec-draft-n-max", str(best.static_k), "--spec-draft-n-min", "0"]
    assert "no per-batch K" in best.deploy.notes[0] and any("-np 12" in n for n in best.deploy.notes)
    assert best.speculative_config is None and best.static_deploy is None  # no vLLM JSON for a llama.cpp sweep
    lines = deploy_lines(rec)
    assert not any("--speculative-config" in line.text for line in lines)
    assert any(line.config is not None and "--spec-draft-n-max" in line.config and line.config.endswith("-np 12")
               for line in lines)


def test_llamacpp_without_a_known_slot_count_leaves_np_to_the_reader() -> None:
    summary, records = sweep(CLEAR, BATCHES, max_num_seqs=None)
    rec = with_deploy_configs(recommend(on_engine(summary, "llamacpp"), records), "llamacpp")  # attached: no command
    best = rec.best
    assert best is not None and best.deploy is not None
    assert "-np" not in best.deploy.flags and any("set -np" in n for n in best.deploy.notes)


def test_sglang_gets_its_static_flags_and_trtllm_its_schedule() -> None:
    summary, records = sweep(CLEAR, BATCHES)
    neutral = recommend(summary, records)
    assert neutral.best is not None and neutral.best.static_spec is not None
    k = neutral.best.static_k
    sglang = with_deploy_configs(neutral, "sglang").best
    assert sglang is not None and sglang.deploy is not None and not sglang.deploy.dynamic
    assert sglang.deploy.flags[:2] == ["--speculative-algorithm", "STANDALONE"]
    flags = sglang.deploy.flags
    assert flags[flags.index("--speculative-num-steps") + 1] == str(k)
    assert flags[flags.index("--speculative-num-draft-tokens") + 1] == str(k + 1)
    trtllm = with_deploy_configs(neutral, "trtllm").best
    assert trtllm is not None and trtllm.deploy is not None and trtllm.deploy.config is not None
    assert trtllm.deploy.flags == ["--extra_llm_api_options", trtllm.deploy.config_file]
    options = yaml.safe_load(yaml.safe_dump(trtllm.deploy.config))["speculative_config"]
    assert options["decoding_type"] == "DraftTarget" and trtllm.deploy.dynamic
    assert neutral.best.spec is not None and options["max_draft_len"] == neutral.best.spec.k
    table = neutral.best.spec.num_speculative_tokens_per_batch_size or []
    schedule = options["draft_len_schedule"]  # TensorRT-LLM drafts the smallest key's K at or above the batch, else 0
    assert all(next((v for key, v in sorted(schedule.items()) if end <= key), 0) == tk for _s, end, tk in table)
    assert trtllm.static_deploy is not None and trtllm.static_deploy.config["speculative_config"]["max_draft_len"] == k
    assert sglang.speculative_config is None and trtllm.speculative_config is None


def test_an_engine_without_a_per_batch_k_and_a_static_k_of_0_deploys_nothing() -> None:
    table = spec(4, num_speculative_tokens_per_batch_size=[(1, 4, 4), (5, 64, 0)])
    assert LlamaCppLauncher().deploy_config(table, None, 16) is None
    with pytest.raises(InputError, match="no per-batch-size K"):
        LlamaCppLauncher().deploy_spec(table, 16)


def config(cid: str, k: int, extra: dict[str, object]) -> PlannedConfig:
    return PlannedConfig(id=cid, role=Role.candidate, spec=spec(k, extra=extra), engine=EngineSpec(model="m"),
                         server=cid)


def test_extras_that_differ_per_k_are_one_drafter_and_a_k_seen_twice_splits_them() -> None:
    per_k = [config("k2", 2, {"spec_draft_p_min": "0.5"}), config("k4", 4, {"spec_draft_p_min": "0.7"})]
    assert [[c.id for c in f] for f in families(per_k, [])] == [["k2", "k4"]]
    twice = [*per_k, config("k2-other", 2, {"spec_draft_p_min": "0.9"})]
    assert sorted([c.id for c in f] for f in families(twice, [])) == [["k2"], ["k2-other"], ["k4"]]
    same = [config("a", 2, {"x": 1}), config("b", 4, {"x": 1}), config("c", 2, {"y": 1}), config("d", 4, {"y": 1})]
    assert sorted([c.id for c in f] for f in families(same, [])) == [["a", "b"], ["c", "d"]]


def test_a_family_with_per_k_extras_deploys_each_k_with_its_own() -> None:
    p_min = {2: "0.5", 4: "0.7"}
    _, neutral = llamacpp_sweep(["-np", "64"], p_min)
    best = neutral.best
    assert best is not None and best.candidates == ["draft_model-k2", "draft_model-k4"]
    assert best.static_spec is not None and best.static_spec.extra == {"spec_draft_p_min": p_min[best.static_k]}
    assert best.spec is not None and best.spec.extra == {"spec_draft_p_min": p_min[best.spec.k]}
    assert any("extras differ per K" in n for n in neutral.notes)
    deploy = with_deploy_configs(neutral, "llamacpp").drafters[0].deploy
    assert deploy is not None
    assert deploy.flags[deploy.flags.index("--spec-draft-p-min") + 1] == p_min[best.static_k]


def test_verify_refuses_an_engine_without_a_per_batch_k() -> None:
    summary, neutral = llamacpp_sweep(["-np", "64"])
    with pytest.raises(InputError, match=r"llamacpp has no per-batch K.*static K"):
        verify_plan(summary, with_deploy_configs(neutral, "llamacpp"), "runs/x")


def test_an_earlier_recommendation_file_reads_as_vllms_config() -> None:
    rec = Recommendation.model_validate_json(FIXTURE.read_text(encoding="utf-8"))
    best = rec.best
    assert best is not None and best.deploy is not None and best.deploy.engine == "vllm" and best.deploy.dynamic
    assert best.deploy.config == best.speculative_config
    assert best.static_deploy is not None and best.static_deploy.k == best.static_k
    assert any(line.config and line.config.startswith("--speculative-config '{") for line in deploy_lines(rec))


def test_analysis_never_imports_an_engine() -> None:
    """Analysis decides, engine-neutral; each engine renders (engines.deploy)."""
    for path in (ROOT / "src" / "specmeter" / "analysis").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("specmeter.engines"), path.name


def test_an_mtp_drafter_on_its_own_target_checkpoint_says_to_serve_that_checkpoint() -> None:
    def mtp(k: int) -> SpecConfig:
        return SpecConfig.model_validate({"method": "mtp", "num_speculative_tokens": k,
                                          "target_model": "models/demo-mtp"})

    summary, records = sweep(CLEAR, BATCHES, extra_specs={cid: mtp(int(cid.rsplit("k", 1)[1])) for cid in CLEAR})
    rec = with_deploy_configs(recommend(summary, records), sweep_engine(summary.plan))
    deployed = [d for d in rec.drafters if d.deploy is not None and d.drafter == "mtp demo-mtp"]
    assert deployed, [d.drafter for d in rec.drafters]
    assert "models/demo-mtp" in deployed[0].deploy.notes[0]  # type: ignore[union-attr]
