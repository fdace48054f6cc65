"""How often the planner refuses a cell of a sweep it should predict, by chance: simulated draws of a small sweep
of one workload (the speculation-off baseline and one drafter at K = 2 and 3, at concurrency 1 and 4, as
tests/integration/test_eagle3_plan_check.py sweeps the EAGLE-3 head), each fitted and asked for every K and batch.

    .venv/bin/python benchmarks/planner_refusals.py               # the model as it stands
    .venv/bin/python benchmarks/planner_refusals.py --no-fold     # as before one request mix folded its KV cost

The draws hold what a real single-workload sweep holds: the single stream is deterministic, so the baseline and
both Ks complete the very same replies at batch 1 (one KV per sequence there), while at batch 4 batching changes a
few replies' lengths (KV per sequence a few percent apart) and the engine's mean batch falls short of 4. The step
times come from a known step cost with 3% noise. Printed: the share of draws refusing each (K, batch) cell, and
the share of all cells beyond batch 1.
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from specmeter.predict import stepcost
from specmeter.predict.acceptance import ALEstimate
from specmeter.predict.observations import Mix, prefill_per_step
from specmeter.predict.predict import Predictor
from specmeter.schemas.planner import Observation

PROMPT, OUTPUT = 60.0, 32.0
SWEPT = ((None, 0), ("draft", 2), ("draft", 3))
KS, BATCHES = (1, 2, 3, 4, 6), (1, 2, 4, 8, 16)
RATE = 0.7  # iid acceptance per position


def al(k: int) -> float:
    return 1.0 + sum(RATE**i for i in range(1, k + 1))


def draw(rng: np.random.Generator) -> list[Observation]:
    """One sweep's points: concurrency 1 (batch 1, identical replies) and 4 (a shorter mean batch, reply lengths
    that differ by chance)."""
    obs = []
    for drafter, k in SWEPT:
        for concurrency in (1, 4):
            batch = 1.0 if concurrency == 1 else float(rng.uniform(2.8, 3.95))
            output = 0.9 * OUTPUT if concurrency == 1 else float(rng.uniform(0.85, 0.95)) * OUTPUT
            per_sequence = PROMPT + output / 2
            tokens = al(k) if k else 1.0
            prefill = prefill_per_step(batch, tokens, PROMPT, OUTPUT)
            step = (0.01 + 0.002 * batch + 0.0003 * batch * (1 + k) + 1e-6 * batch * per_sequence + 1e-5 * prefill
                    + 0.002 * k + 0.0005 * k * batch) * float(rng.normal(1.0, 0.03))
            obs.append(Observation(run="simulated", config_id=f"k{k}", point_id=f"c{concurrency}", repeat=0,
                                   drafter=drafter, k=k, batch=batch, tokens_per_step=tokens,
                                   kv_tokens=batch * per_sequence, prefill_tokens=prefill, step_s=step))
    return obs


def refusals(draws: int, seed: int) -> Counter[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    refused: Counter[tuple[int, int]] = Counter()
    for _ in range(draws):
        obs = draw(rng)
        mean = float(np.mean([o.kv_tokens / o.batch for o in obs]))
        predictor = Predictor(stepcost.fit(obs, ["draft"]), Mix(PROMPT, 2 * (mean - PROMPT)))
        for k in KS:
            a = al(k)
            for batch in BATCHES:
                est = predictor.estimate("draft", k, ALEstimate(k=k, al=a, low=0.9 * a, high=min(1.1 * a, k + 1.0)),
                                         float(batch))
                if isinstance(est, str):
                    refused[(k, batch)] += 1
    return refused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-fold", action="store_true",
                        help="Fit the KV term on one request mix too (the model before the fold).")
    args = parser.parse_args()
    if args.no_fold:
        stepcost.ONE_MIX = -1.0  # no spread is at most -1 x the largest: never one mix
    refused = refusals(args.draws, args.seed)
    print(f"{args.draws} draws, {'no fold' if args.no_fold else 'one request mix folded'}: share of draws refusing")
    print("K \\ batch " + "".join(f"{b:>7}" for b in BATCHES))
    for k in KS:
        print(f"{k:>9} " + "".join(f"{refused[(k, b)] / args.draws:>7.0%}" for b in BATCHES))
    beyond = sum(n for (_, b), n in refused.items() if b > 1)
    print(f"cells beyond batch 1 refused: {beyond / (args.draws * len(KS) * (len(BATCHES) - 1)):.0%}")


if __name__ == "__main__":
    main()
