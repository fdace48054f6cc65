"""Placement on one node (placement/): inventories of 1, 2, 4 and 8 GPUs, tensor parallel 1, 2 and 4, and 2 to 5
servers: disjoint where they fit, equal memory fractions where they share, one at a time where neither works, and
never a GPU that was not given."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines.sglang import SGLangLauncher
from specmeter.engines.trtllm import TRTLLMLauncher
from specmeter.engines.vllm import VLLMLauncher
from specmeter.placement.inventory import detect_gpus, parse_gpu_ids, parse_nvidia_smi, visible_devices
from specmeter.placement.place import GIB, GPU_SHARE, ServerNeed, place
from specmeter.placement.servers import place_configs, placed
from specmeter.placement.weights import weights_bytes
from specmeter.plans.sweep import SweepSpec, placed_on_node
from specmeter.schemas.placement import Gpu
from specmeter.schemas.plan import WorkloadSelection

# Recorded on an 8-GPU node (nvidia-smi 550, --format=csv,noheader,nounits).
SMI_8 = """0, NVIDIA H100 80GB HBM3, 81559
1, NVIDIA H100 80GB HBM3, 81559
2, NVIDIA H100 80GB HBM3, 81559
3, NVIDIA H100 80GB HBM3, 81559
4, NVIDIA H100 80GB HBM3, 81559
5, NVIDIA H100 80GB HBM3, 81559
6, NVIDIA H100 80GB HBM3, 81559
7, NVIDIA H100 80GB HBM3, 81559
"""


def inventory(n: int) -> list[Gpu]:
    return parse_nvidia_smi(SMI_8)[:n]


def needs(count: int, tp: int, weights_gib: float | None = None) -> list[ServerNeed]:
    size = None if weights_gib is None else int(weights_gib * GIB)
    return [ServerNeed(server=f"s{i}", tensor_parallel_size=tp, weights_bytes=size) for i in range(count)]


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("count", [2, 3, 4, 5])
def test_interleaved_servers_run_apart_where_they_fit_and_share_equally_where_not(gpus: int, tp: int,
                                                                                   count: int) -> None:
    given = inventory(gpus)
    if tp > gpus:
        with pytest.raises(InputError, match=f"needs {tp} GPUs"):
            place(needs(count, tp), given, interleave=True, source="--gpus")
        return
    p = place(needs(count, tp), given, interleave=True, source="--gpus")
    ids = {g.id for g in given}
    per_gpu = Counter(g for s in p.servers for g in s.gpus)
    assert len(p.servers) == count
    for s in p.servers:
        assert set(s.gpus) <= ids and len(set(s.gpus)) == len(s.gpus) == tp  # never a GPU not given
        assert int(s.gpus[0]) % tp == 0 and [int(g) for g in s.gpus] == list(range(int(s.gpus[0]), int(s.gpus[0]) + tp))
    if count * tp <= gpus:
        assert p.mode == "disjoint" and max(per_gpu.values()) == 1
        assert all(s.memory_fraction is None for s in p.servers)  # alone on its GPUs: the engine's default
    else:
        assert p.mode == "shared"
        fractions = {s.memory_fraction for s in p.servers}
        assert len(fractions) == 1  # equal KV memory by construction
        (fraction,) = fractions
        assert fraction == math.floor(GPU_SHARE / p.servers_per_gpu * 100) / 100
        assert max(per_gpu.values()) == p.servers_per_gpu == math.ceil(count / (gpus // tp))  # spread evenly
        assert fraction * p.servers_per_gpu <= GPU_SHARE + 1e-9


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("count", [2, 3, 4, 5])
def test_one_at_a_time_when_sharing_leaves_no_room_for_the_kv_cache(gpus: int, tp: int, count: int) -> None:
    if tp > gpus:
        return
    # 60 GiB of weights per GPU: half of an 80 GiB GPU's 0.45 share is 18 GiB, so two servers cannot share.
    p = place(needs(count, tp, weights_gib=60.0 * tp), inventory(gpus), interleave=True, source="nvidia-smi")
    if count * tp <= gpus:
        assert p.mode == "disjoint" and p.warning is None
        return
    assert p.mode == "sequential"
    assert p.warning is not None and f"interleaving {count} servers at TP {tp} needs {count * tp} GPUs" in p.warning
    assert "one server at a time" in p.warning
    for s in p.servers:  # each alone, on the first GPUs it needs, with the engine's default memory
        assert s.gpus == [str(i) for i in range(tp)] and s.memory_fraction is None


def test_small_weights_share_and_unknown_weights_are_not_checked() -> None:
    assert place(needs(3, 1, weights_gib=1.0), inventory(1), interleave=True, source="x").mode == "shared"
    assert place(needs(3, 1), inventory(1), interleave=True, source="x").mode == "shared"


def test_without_interleave_every_server_runs_alone_without_a_warning() -> None:
    p = place(needs(3, 2), inventory(4), interleave=False, source="x")
    assert p.mode == "sequential" and p.warning is None
    assert all(s.gpus == ["0", "1"] for s in p.servers)


def test_no_gpu_is_a_cpu_run_where_nothing_is_placed() -> None:
    p = place(needs(3, 1), [], interleave=True, source="none found")
    assert p.mode == "cpu" and p.servers == []


def test_mixed_widths_pack_apart_where_they_fit() -> None:
    mixed = [ServerNeed("a", 1), ServerNeed("b", 2), ServerNeed("c", 1)]
    p = place(mixed, inventory(4), interleave=True, source="x")
    assert p.mode == "disjoint"
    assert sorted(g for s in p.servers for g in s.gpus) == ["0", "1", "2", "3"]


def test_a_memory_fraction_given_is_kept_where_it_fits_and_refused_where_not() -> None:
    two = [ServerNeed("a", 1, memory_fraction=0.4), ServerNeed("b", 1, memory_fraction=0.4)]
    assert {s.memory_fraction for s in place(two, inventory(1), interleave=True, source="x").servers} == {0.4}
    assert {s.memory_fraction for s in place(two, inventory(2), interleave=True, source="x").servers} == {0.4}
    greedy = [ServerNeed("a", 1, memory_fraction=0.6), ServerNeed("b", 1, memory_fraction=0.6)]
    with pytest.raises(InputError, match=r"memory_fraction 0\.6 for 2 servers per GPU asks 1\.20 of each GPU; "
                                         r"give at most 0\.45"):
        place(greedy, inventory(1), interleave=True, source="x")
    with pytest.raises(InputError, match="different memory fractions"):
        place([ServerNeed("a", 1, memory_fraction=0.3), ServerNeed("b", 1, memory_fraction=0.4)], inventory(2),
              interleave=True, source="x")


# -- the inventory -----------------------------------------------------------------------------------------------
def test_nvidia_smi_lines_parse_to_gpus() -> None:
    gpus = parse_nvidia_smi(SMI_8 + "\n")
    assert [g.id for g in gpus] == [str(i) for i in range(8)]
    assert gpus[0].name == "NVIDIA H100 80GB HBM3" and gpus[0].memory_mib == 81559
    mig = parse_nvidia_smi("0, NVIDIA A100-SXM4-40GB, [N/A]\n")
    assert mig[0].memory_mib is None
    with pytest.raises(InputError, match="not 'index, name, memory'"):
        parse_nvidia_smi("No devices were found")


@pytest.mark.parametrize(("value", "ids"), [("0,1", ["0", "1"]), (" 2, 3 ", ["2", "3"]), ("", []), ("-1", []),
                                             ("0,-1,2", ["0"]), ("GPU-8c0e7f1a", ["GPU-8c0e7f1a"])])
def test_cuda_visible_devices_reads_as_cuda_does(value: str, ids: list[str]) -> None:
    assert visible_devices(value) == ids


def test_gpu_ids_given_are_checked() -> None:
    assert parse_gpu_ids("0,1,3", "--gpus") == ["0", "1", "3"]
    with pytest.raises(InputError, match="GPU 1 is listed twice"):
        parse_gpu_ids("1,1", "--gpus")
    with pytest.raises(InputError, match="give GPU ids separated by commas"):
        parse_gpu_ids("0,,1", "--gpus")


def test_detection_order_is_flag_then_environment_then_nvidia_smi() -> None:
    def smi() -> str:
        return SMI_8

    gpus, source = detect_gpus(["2", "3"], "--gpus", {"CUDA_VISIBLE_DEVICES": "0"}, smi)
    assert [g.id for g in gpus] == ["2", "3"] and source == "--gpus" and gpus[0].memory_mib == 81559
    gpus, source = detect_gpus(None, "--gpus", {"CUDA_VISIBLE_DEVICES": "4,5"}, smi)
    assert [g.id for g in gpus] == ["4", "5"] and source == "CUDA_VISIBLE_DEVICES"
    gpus, source = detect_gpus(None, "--gpus", {}, smi)
    assert len(gpus) == 8 and source == "nvidia-smi"
    assert detect_gpus(None, "--gpus", {}, lambda: None) == ([], "none found")
    assert detect_gpus(["0", "1"], "--gpus", {}, lambda: None)[0] == [Gpu(id="0"), Gpu(id="1")]  # no driver here
    with pytest.raises(InputError, match="--gpus: GPU 9 is not one nvidia-smi lists"):
        detect_gpus(["9"], "--gpus", {}, smi)


def test_weights_are_read_from_local_files(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / "pytorch_model.bin").write_bytes(b"x" * 5000)  # the same weights in another format: not counted
    (tmp_path / "config.json").write_text("{}")
    assert weights_bytes(str(tmp_path)) == 1000
    assert weights_bytes("meta-llama/Llama-3.1-8B-Instruct") is None


# -- the plan's configurations placed, and each engine's flags ---------------------------------------------------
def sweep(**engine: object) -> SweepSpec:
    return SweepSpec.model_validate({
        "engine": {"model": "m", **engine}, "interleave": True,
        "candidates": [{"method": "ngram", "num_speculative_tokens": [2, 4]}]})


def test_placed_configurations_carry_their_gpus_and_memory_fraction() -> None:
    sw = sweep(tensor_parallel_size=2)
    placement = sw.place(inventory(4), "--gpus")
    assert placement.mode == "shared" and placement.servers_per_gpu == 2
    configs = placed(sw.configs(), placement)
    envs = [c.engine.env["CUDA_VISIBLE_DEVICES"] for c in configs]
    assert envs == ["0,1", "2,3", "0,1"]
    assert {c.engine.memory_fraction for c in configs} == {0.45}
    assert all(c.engine.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" for c in configs)


def test_settings_placement_makes_are_refused_elsewhere() -> None:
    with pytest.raises(InputError, match="extra_args sets --gpu-memory-utilization, which placement sets"):
        sweep(extra_args=["--gpu-memory-utilization=0.5"]).place(inventory(2), "--gpus")
    with pytest.raises(InputError, match="env sets CUDA_VISIBLE_DEVICES"):
        sweep(env={"CUDA_VISIBLE_DEVICES": "1"}).place(inventory(2), "--gpus")
    # On a CPU run nothing is placed, so nothing conflicts.
    assert sweep(extra_args=["--gpu-memory-utilization", "0.5"]).place([], "none found").mode == "cpu"


def test_a_sequential_fallback_turns_interleave_off_and_what_needs_it_refuses() -> None:
    sw = sweep(tensor_parallel_size=2)
    fallback = place(needs(3, 2, weights_gib=120.0), inventory(2), interleave=True, source="--gpus")
    fallback.servers = [s.model_copy(update={"server": c.server}) for s, c in zip(fallback.servers, sw.configs())]
    plan = sw.plan(WorkloadSelection(dataset="sample"), fallback)
    assert not plan.interleave and plan.load.precision == "fixed" and plan.placement == fallback
    adaptive = sw.model_copy(update={"load": sw.load.model_copy(update={"precision": "adaptive"})})
    with pytest.raises(InputError, match=r"load\.precision adaptive needs every server up together"):
        adaptive.plan(WorkloadSelection(dataset="sample"), fallback)


def test_draft_tensor_parallel_widens_the_server() -> None:
    sw = SweepSpec.model_validate({"engine": {"model": "m"}, "candidates": [
        {"method": "draft_model", "model": "d", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 2}]})
    p = place_configs(sw.configs(), inventory(4), "--gpus", interleave=True)
    assert [s.tensor_parallel_size for s in p.servers] == [1, 2]


def test_each_engine_renders_tensor_parallel_and_memory_fraction() -> None:
    engine = EngineSpec(model="m", tensor_parallel_size=2, memory_fraction=0.45)
    cmd = VLLMLauncher().server_command(engine, SpecConfig(), 8000)
    assert cmd[cmd.index("--tensor-parallel-size") + 1] == "2"
    assert cmd[cmd.index("--gpu-memory-utilization") + 1] == "0.45"
    cmd = SGLangLauncher().server_command(engine.model_copy(update={"kind": "sglang"}), SpecConfig(), 8000)
    assert cmd[cmd.index("--tp-size") + 1] == "2" and cmd[cmd.index("--mem-fraction-static") + 1] == "0.45"
    options = TRTLLMLauncher.llm_api_options(engine, SpecConfig())
    assert options["tensor_parallel_size"] == 2 and options["kv_cache_config"] == {"free_gpu_memory_fraction": 0.45}
    plain = VLLMLauncher().server_command(EngineSpec(model="m"), SpecConfig(), 8000)
    assert "--tensor-parallel-size" not in plain and "--gpu-memory-utilization" not in plain  # CPU: unchanged


def test_llamacpp_has_no_memory_fraction() -> None:
    with pytest.raises(ValueError, match="llamacpp has no memory fraction"):
        EngineSpec(kind="llamacpp", model="m", memory_fraction=0.4)


def test_placed_llamacpp_servers_share_the_gpu_without_a_memory_fraction_and_read_back() -> None:
    """The placement keeps its split (the report compares KV capacities with it), but llama-server takes none:
    a placed plan written to a run directory must validate when `resume` reads it back."""
    sw = SweepSpec.model_validate({"engine": {"kind": "llamacpp", "model": "m"}, "candidates": [
        {"method": "draft_model", "model": "d", "num_speculative_tokens": k} for k in (2, 4)], "interleave": True})
    placement = sw.place(inventory(1), "--gpus")
    assert placement.mode == "shared" and all(s.memory_fraction is not None for s in placement.servers)
    configs = placed(sw.configs(), placement)
    assert all(c.engine.memory_fraction is None and c.engine.env["CUDA_VISIBLE_DEVICES"] == "0" for c in configs)
    assert [type(c).model_validate(c.model_dump()) for c in configs] == configs


def test_a_slurm_job_places_its_plan_on_the_gpus_of_its_allocation() -> None:
    """The driver plans without a placement (the login node's GPUs are not the job's); the job places it there."""
    sw = sweep(tensor_parallel_size=2)
    plan = sw.plan(WorkloadSelection(dataset="sample"))
    assert plan.placement is None
    on_node = placed_on_node(plan, inventory(8), "CUDA_VISIBLE_DEVICES")
    assert on_node.placement is not None and on_node.placement.mode == "disjoint" and on_node.interleave
    envs = [c.engine.env["CUDA_VISIBLE_DEVICES"] for c in on_node.configs]
    assert envs == ["0,1", "2,3", "4,5"]
    on_cpu = placed_on_node(plan, [], "none found")
    assert on_cpu.placement is not None and on_cpu.placement.mode == "cpu" and on_cpu.configs == plan.configs
