"""A model-based drafter that accepts almost nothing over many drafts: its weights are probably missing or random
(a checkpoint quantized without its MTP tensors gets a random head on engines that do not check, an EAGLE head
trained for another target, an untrained draft). Speculation then only costs, and nothing else in the numbers says
why; the preflight (engines/preflight.py) catches a local MTP target without MTP tensors before it starts."""

from __future__ import annotations

from specmeter.config.models import SpecMethod
from specmeter.schemas.results import RunSummary

MODEL_DRAFTERS = (SpecMethod.draft_model, SpecMethod.eagle, SpecMethod.eagle3, SpecMethod.mtp)
MIN_DRAFTED = 256  # drafted tokens over the run below which a rate near zero may be chance
NEAR_ZERO = 0.02  # accepted per drafted token: a trained drafter of the target accepts far more, even at T = 1


def untrained_drafters(summary: RunSummary) -> list[str]:
    """One line per configuration with a model-based drafter whose engine counted at least MIN_DRAFTED drafted
    tokens over the run and accepted fewer than NEAR_ZERO of them."""
    out = []
    for cfg in summary.plan.configs:
        result = summary.config(cfg.id)
        if cfg.spec.method not in MODEL_DRAFTERS or cfg.spec.synthetic or result is None:
            continue
        counts = [c for p in result.points if p.sd.available and (c := p.sd.headline) is not None]
        drafted = sum(c.num_draft_tokens for c in counts)
        accepted = sum(c.num_accepted_tokens for c in counts)
        if drafted >= MIN_DRAFTED and accepted < NEAR_ZERO * drafted:
            out.append(f"{cfg.id}: accepted {accepted} of {drafted} drafted tokens ({accepted / drafted:.1%}): its "
                       f"{cfg.spec.method.value} drafter's weights are probably missing or random (a checkpoint "
                       "without its MTP tensors, an EAGLE head trained for another target, an untrained draft); "
                       "check the tensor names in its checkpoint (the safetensors headers, or "
                       "model.safetensors.index.json's weight_map) and that it was trained for this target")
    return out
