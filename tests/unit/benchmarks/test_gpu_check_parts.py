"""benchmarks/gpu/: the GPU check's parts that need no server: its sweep file, the pair's shapes and files,
nvidia-smi's readings, the diagnosis of the step-cost model by one more term (a knee or a cap), check.sh's
refusals and the comparison of runs (across.py) on the committed H100 run. The CPU twin of the whole check runs in
tests/integration/test_gpu_check.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
for where in (ROOT / "benchmarks", ROOT / "benchmarks" / "gpu"):
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))

import across  # noqa: E402
import check  # noqa: E402
import findings  # noqa: E402
import pair  # noqa: E402
import smi  # noqa: E402

from specmeter.plans.sweep import SweepSpec  # noqa: E402
from specmeter.predict.calibration import calibrate  # noqa: E402
from specmeter.schemas.planner import Observation  # noqa: E402
from specmeter.schemas.results import RunSummary  # noqa: E402


@pytest.mark.parametrize("name", sorted(check.PROFILES))
def test_each_profile_sweeps_the_baseline_and_each_k_at_a_realistic_profile_and_its_ceiling(name: str) -> None:
    profile = check.PROFILES[name]
    spec = SweepSpec.model_validate(check.sweep_file(profile, Path("pair/target"), Path("pair/draft")))
    configs = spec.configs()
    assert configs[0].id == "baseline" and not configs[0].spec.enabled
    drafted = configs[1:]
    assert sorted(c.k for c in drafted) == sorted([*check.KS, *check.KS])
    for c in drafted:
        synth = c.spec.synthetic_acceptance
        assert synth is not None and c.spec.draft_model == "pair/draft"
        assert synth.is_ceiling(c.k) or synth.rates_for(c.k) == list(check.RATES[:c.k])
    assert sum(c.spec.synthetic_acceptance.is_ceiling(c.k) for c in drafted  # type: ignore[union-attr]
               ) == len(check.KS)
    assert spec.interleave and spec.engine.kind == "llamacpp" and spec.load.ignore_eos
    assert [p.slots for p in spec.load.points] == list(profile.concurrency)
    assert spec.engine.max_num_seqs == max(profile.concurrency)  # a slot for every request in flight
    assert check.LEFT_OUT_K in check.KS and len(check.KS) > 1  # something to calibrate on besides it


def test_a_design_of_more_ks_sweeps_each_at_the_realistic_profile_alone() -> None:
    ks = check.parse_ks("6,1,2,3,4")
    assert ks == (1, 2, 3, 4, 6)
    spec = SweepSpec.model_validate(check.sweep_file(check.PROFILES["gpu"], Path("t"), Path("d"), ks, ceiling=False))
    drafted = spec.configs()[1:]
    assert [c.k for c in drafted] == list(ks)
    for c in drafted:  # every K drafts the same first positions: K = 2 and 4 as in the default design
        assert c.spec.synthetic_acceptance is not None
        assert c.spec.synthetic_acceptance.rates_for(c.k) == list(check.RATES[:c.k])
    assert check.left_out_k(ks) == check.LEFT_OUT_K and check.left_out_k((1, 2, 3)) == 3


@pytest.mark.parametrize("text", ["4", "0,2", "2,99", "two,four"])
def test_a_design_needs_two_ks_the_profile_sets(text: str) -> None:
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="--ks"):
        check.parse_ks(text)


def test_the_gpu_pair_is_a_1b_target_and_a_small_draft_of_its_vocabulary() -> None:
    gpu = check.PROFILES["gpu"]
    vocab = pair.vocab_size()
    assert 0.9e9 < gpu.target.params(vocab) < 1.2e9
    assert gpu.draft.params(vocab) < 0.1 * gpu.target.params(vocab)
    assert max(gpu.concurrency) == 64 and min(gpu.concurrency) == 1
    # grouped-query attention: 22 layers x 4 KV heads x 64 x 2 (keys, values) x 2 bytes
    assert gpu.target.kv_bytes_per_token("float16") == 22 * 4 * 64 * 2 * 2


def test_a_pair_is_written_as_hugging_face_files_and_kept_when_made_alike(tmp_path: Path) -> None:
    from safetensors import safe_open

    shape = pair.Shape(layers=2, hidden=64, kv_heads=1, intermediate=96)
    target, draft = pair.make_pair(tmp_path, shape, shape, "float32", seed=3)
    config = json.loads((target / "config.json").read_text())
    assert config["num_hidden_layers"] == 2 and config["hidden_size"] == 64 and config["num_key_value_heads"] == 1
    assert config["architectures"] == ["LlamaForCausalLM"] and config["vocab_size"] == pair.vocab_size()
    assert (target / "tokenizer.json").read_bytes() == (pair.TOKENIZER / "tokenizer.json").read_bytes()
    with safe_open(str(target / "model.safetensors"), "pt") as fh:
        names = set(fh.keys())
        assert tuple(fh.get_tensor("model.layers.1.self_attn.k_proj.weight").shape) == (64, 64)
        total = sum(fh.get_tensor(n).numel() for n in names)
    assert total == shape.params(pair.vocab_size())
    with safe_open(str(draft / "model.safetensors"), "pt") as a, safe_open(str(target / "model.safetensors"),
                                                                             "pt") as b:
        assert not a.get_tensor("model.norm.weight").ne(1).any()
        assert a.get_tensor("model.embed_tokens.weight").ne(b.get_tensor("model.embed_tokens.weight")).any()
    made = (target / "model.safetensors").stat().st_mtime_ns
    pair.make_pair(tmp_path, shape, shape, "float32", seed=3)
    assert (target / "model.safetensors").stat().st_mtime_ns == made  # the same pair is not made again
    pair.make_pair(tmp_path, shape, shape, "float32", seed=4)
    assert (target / "model.safetensors").stat().st_mtime_ns != made


def test_nvidia_smi_readings_per_process_and_per_gpu() -> None:
    apps = [{"t_s": "1.0", "pid": "11", "used_memory": "900"}, {"t_s": "2.0", "pid": "11", "used_memory": "1400"},
            {"t_s": "2.0", "pid": "12", "used_memory": "[N/A]"}, {"t_s": "3.0", "pid": "12", "used_memory": "700"}]
    assert smi.peak_memory_by_pid(apps) == {11: 1400.0, 12: 700.0}
    row = {"index": "0", "name": "NVIDIA H100 80GB HBM3", "memory.total": "81559", "utilization.gpu": "50",
           "power.draw": "[Not Supported]", "clocks.sm": "1980", "clocks.mem": "2619", "temperature.gpu": "40"}
    rows = [{**row, "memory.used": "1000"}, {**row, "memory.used": "9000", "utilization.gpu": "100",
                                             "clocks.sm": "345"}]
    (gpu,) = smi.gpu_summary(rows)
    assert gpu["name"] == "NVIDIA H100 80GB HBM3" and gpu["memory_total_mib"] == 81559.0
    assert gpu["memory_used_peak_mib"] == 9000.0 and gpu["power_peak_w"] is None
    assert gpu["sm_clock_mhz"] == [345.0, 1980.0] and gpu["utilization_mean_pct"] == 75.0


def _observations(step: object) -> list[Observation]:
    """Baseline and one drafter at K = 2 over batches 1 to 64, each step timed by `step(batch, k)`."""
    out = []
    for k, drafter in ((0.0, None), (2.0, "d")):
        for batch in (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0):
            out.append(Observation(run="r", config_id=f"k{k:g}", point_id=f"c{batch:g}", repeat=0, drafter=drafter,
                                   k=k, batch=batch, tokens_per_step=1.0 + k, kv_tokens=batch * 100.0,
                                   prefill_tokens=0.0, step_s=step(batch, k)))  # type: ignore[operator]
    return out


def test_a_knee_or_a_cap_fits_its_own_step_shape_and_adds_nothing_to_a_linear_one() -> None:
    def linear(batch: float, k: float) -> float:
        return 0.004 + 0.0001 * batch * (1 + k) + (0.001 * k if k else 0.0)

    def knee(batch: float, k: float) -> float:  # flat until 64 tokens per step, then 20 us per token
        return linear(batch, k) + 2e-5 * max(0.0, batch * (1 + k) - 64)

    def cap(batch: float, k: float) -> float:  # 1 ms more per sequence up to 16 sequences, then flat
        return linear(batch, k) + 1e-3 * min(batch, 16)

    _, sd_linear = findings.fit_step_cost(_observations(linear), ["d"])
    assert sd_linear < 1e-6
    linear_sd, term_sd, term, beta = findings.best_term(_observations(knee), ["d"])
    assert term == findings.Term("knee", 64) and term_sd < 1e-6 < linear_sd
    assert beta[-1] == pytest.approx(2e-5, rel=1e-3) and np.all(beta >= 0)
    linear_sd, term_sd, term, beta = findings.best_term(_observations(cap), ["d"])
    assert term == findings.Term("cap", 16) and term_sd < 1e-6 < linear_sd
    assert beta[-1] == pytest.approx(1e-3, rel=1e-3)
    assert "16 running sequences" in term.describe()


@pytest.mark.parametrize(("args", "says"), [([], "give --out DIR"), (["--nope"], "unknown argument --nope")])
def test_check_sh_refuses_before_doing_anything(args: list[str], says: str) -> None:
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu" / "check.sh"), *args], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 2 and says in done.stderr


COMMITTED = ROOT / "benchmarks" / "gpu" / "results-20261126-nvidia-h100-80gb-hbm3"


def test_runs_side_by_side_give_each_cell_its_range_and_each_runs_planner_diagnosis(tmp_path: Path) -> None:
    folders = []
    for name in ("a", "b"):  # the same run twice: every range is a point and the intervals overlap
        folder = tmp_path / name
        folder.mkdir()
        for file in ("summary.json", "run-summary.json"):
            (folder / file).write_bytes((COMMITTED / file).read_bytes())
        folders.append(folder)
    doc = across.across([across.read(f) for f in folders])
    own = json.loads((COMMITTED / "summary.json").read_text(encoding="utf-8"))["findings"]
    cells = {(c["config"], c["concurrency"]): c for c in doc["speedup"]}
    for cid, rows in own["speedup"]["curves"].items():
        for r in rows:
            cell = cells[(cid, r["concurrency"])]
            assert cell["throughput"]["n"] == 2 and cell["intervals_overlap"]
            assert cell["throughput"]["low"] == cell["throughput"]["median"] == cell["throughput"]["high"]
            assert cell["throughput"]["median"] == r["throughput"]
    # Diagnosed again from the run's summary as the check diagnoses (by the planner as it stands now, which may have
    # changed since the check wrote its own figures), and more.
    summary = RunSummary.model_validate_json((COMMITTED / "run-summary.json").read_text(encoding="utf-8"))
    fresh = findings.planner(summary, COMMITTED, own["planner"]["left_out_k"])
    for run in doc["planner"]["runs"]:
        assert run["median_abs_error"] == pytest.approx(fresh["median_abs_error"])
        assert run["term_median_abs_error"] == pytest.approx(fresh["term"]["median_abs_error"])
        assert run["step"]["median_abs_error"] is not None and run["drafting"]["per_step_s"] >= 0
    assert doc["planner"]["held"] == []  # both chose the same term: holding one on the other is no news
    text = across.markdown(doc)
    assert "across 2 runs" in text and "0 of 28 cells" in text and "chose the same term" in text


def test_a_term_held_fixed_refits_its_cost_and_one_k_cannot_split_the_drafting() -> None:
    summary = RunSummary.model_validate_json((COMMITTED / "run-summary.json").read_text(encoding="utf-8"))
    chosen = findings.planner(summary, COMMITTED, 4)["term"]
    held = findings.planner(summary, COMMITTED, 4, [findings.Term(chosen["shape"], chosen["at"])])["term"]
    assert held["term"] == chosen["term"] and held["residual_sd"] == pytest.approx(chosen["residual_sd"])
    assert held["median_abs_error"] == pytest.approx(chosen["median_abs_error"])
    used = [o for o in calibrate([("h100", summary)]).observations if o.used]
    drafters = sorted({o.drafter for o in used if o.drafter})
    cap = findings.Term("cap", 12)
    split = findings.drafting_split(used, drafters, cap)
    assert split is not None and split["split_residual_sd"] <= split["residual_sd"]
    assert findings.drafting_split([o for o in used if round(o.k) != 4], drafters, cap) is None


def test_across_refuses_a_folder_the_check_did_not_write(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"has no summary\.json"):
        across.read(tmp_path)


def test_across_refuses_runs_of_two_kinds_of_gpu() -> None:
    h200 = ROOT / "benchmarks" / "gpu" / "results-20261128-nvidia-h200"
    with pytest.raises(SystemExit, match=r"2 devices .*H100.*H200"):
        across.main([str(COMMITTED), str(h200)])
