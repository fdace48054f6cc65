"""recommend's K-per-batch table with the batch sizes no point measured filled from the model.

Measured, interpolated and below-measured ranges stay as recommend decided them head to head. Beyond the
largest batch measured, recommend claims nothing (drafting off); here each batch size takes the K the model
predicts fastest: a K is chosen only where its whole predicted interval beats speculation off by the minimum
gain, and a larger K replaces a smaller one only when its predicted speedup is higher by more than that gain.
Those ranges are labelled predicted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from specmeter.analysis.recommend import merge_segments
from specmeter.predict.acceptance import AcceptanceProfile
from specmeter.predict.predict import Estimate, Predictor
from specmeter.schemas.recommend import DrafterRecommendation, Segment

Choice = tuple[int, Estimate | None]


def predicted_k(predictor: Predictor, drafter: str, profile: AcceptanceProfile, ks: Sequence[int], batch: int, *,
                min_gain: float) -> Choice:
    """The K the model picks at `batch` (0: speculation off), with its estimate."""
    best: Choice = (0, None)
    for k in sorted(ks):
        est = predictor.estimate(drafter, k, profile.al(k), float(batch))
        if isinstance(est, str):
            continue
        sure = est.low if est.low is not None else est.speedup
        if sure <= 1.0 + min_gain:
            continue
        current = best[1].speedup if best[1] is not None else 1.0
        if est.speedup > current * (1.0 + min_gain):
            best = (k, est)
    return best


def fill_unmeasured(rec: DrafterRecommendation, choose: Callable[[int], Choice]) -> DrafterRecommendation:
    """`rec` with each unmeasured segment replaced by predicted ones, one per run of equal predicted K."""
    segments: list[Segment] = []
    for seg in rec.segments:
        if seg.basis != "unmeasured":
            segments.append(seg)
            continue
        start = seg.start
        current = choose(start)
        for b in range(seg.start + 1, seg.end + 2):
            nxt = choose(b) if b <= seg.end else None
            if nxt is not None and nxt[0] == current[0]:
                continue
            est = current[1]
            why = (f"predicted: K = {current[0]} at {est.speedup:.2f}x"
                   + (f" [{est.low:.2f}, {est.high:.2f}]" if est.low is not None and est.high is not None else "")
                   if est is not None else "predicted: no K beats speculation off by the minimum gain")
            segments.append(Segment(start=start, end=b - 1, k=current[0], basis="predicted",
                                    point_ids=seg.point_ids, engine_batch=seg.engine_batch,
                                    reason=f"{why} at batch {start} (beyond the largest batch measured; the "
                                           "step-cost model)"))
            if nxt is not None:
                start, current = b, nxt
    return rec.model_copy(update={"segments": segments, "ranges": merge_segments(segments)})

