"""An engine-neutral recommendation rendered for the engine a sweep ran: each drafter's table or static K
as that engine's launch flags, by the engine's own launcher (analysis decides, never names a flag)."""

from __future__ import annotations

from specmeter.engines.registry import get_engine
from specmeter.schemas.plan import Plan
from specmeter.schemas.recommend import Recommendation


def sweep_engine(plan: Plan) -> str:
    """The engine kind the sweep's baseline ran (the configuration every recommendation compares against)."""
    base = plan.main_baseline
    return (base.engine.kind if base is not None else None) or "vllm"


def with_deploy_configs(rec: Recommendation, kind: str) -> Recommendation:
    """`rec` with every drafter's deploy configs for engine `kind` (and vLLM's JSON in the fields earlier
    readers of recommendation.json know)."""
    launcher = get_engine(kind).launcher
    # A last range that ends at a guessed max_num_seqs says nothing about the slots the engine should get.
    slots = None if rec.max_num_seqs_source.startswith("unknown") else rec.max_num_seqs
    drafters = []
    for d in rec.drafters:
        deploy = launcher.deploy_config(d.spec, d.static_spec, slots)
        # With a per-batch K the static K stays at hand for where the table does not apply (vLLM with data
        # parallel > 1 drops it); elsewhere `deploy` already is the static K.
        static = (launcher.deploy_spec(d.static_spec, slots)
                  if launcher.per_batch_k and d.static_spec is not None else None)
        own = next((s.target_model for s in (d.spec, d.static_spec) if s is not None and s.target_model), None)
        if deploy is not None and own is not None:
            deploy.notes.insert(0, f"serve the target from {own} (the checkpoint that keeps its MTP layers, as "
                                   "measured), not from the model the baseline served")
        vllm = kind == "vllm"
        drafters.append(d.model_copy(update={
            "deploy": deploy, "static_deploy": static,
            "speculative_config": deploy.config if vllm and deploy is not None else None,
            "static_speculative_config": static.config if vllm and static is not None else None}))
    return rec.model_copy(update={"drafters": drafters})
