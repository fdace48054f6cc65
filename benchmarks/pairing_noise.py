"""How much of a round's noise is drift: two configurations at concurrency 1, compared round after round with each
round's requests sent in whole blocks (all of one configuration's, then all of the other's, as the demo's rounds
run today) and with the two alternating request by request (the same prompt to each, a second apart).

A sequential decision reads each round's ratio; where it swings from round to round, the repeats' spread keeps
the interval wide and a near tie runs the whole budget. If that swing is drift (the machine a little slower for
a minute), alternating requests cancels it and the per-round ratios agree; what is left is the per-request noise,
which only more requests shrink. This measures both on the demo's own servers and prompts: per round, the ratio
B / A of output throughput (tokens over the requests' summed end-to-end time) under each design; the standard
deviation of those ratios across rounds; and the standard deviation of the per-request ratios within a round.

Run (about 8 minutes on 2 cores: two server starts, then the rounds; nothing else should run meanwhile):
    .venv/bin/python benchmarks/pairing_noise.py --ks 2,4 --rounds 5 --out runs/bench-pairing
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

from specmeter.config.models import LoadSpec, SpecConfig, SpecMethod
from specmeter.data.workload import load_conversations
from specmeter.engines.launcher import LaunchedServer
from specmeter.engines.registry import get_engine
from specmeter.plans.demo import DRAFT, demo_engine, models_dir

Sent = tuple[int, float]  # (output tokens, end-to-end seconds) of one request


@dataclass
class Round:
    index: int
    blocked: float  # B / A throughput, each configuration's requests in one block
    alternated: float  # B / A throughput, the two alternating request by request
    a_blocked: float  # A's tokens per second in its block (drift shows here)
    a_alternated: float
    per_request_sd_blocked: float  # spread of the per-request ratios B / A within the round
    per_request_sd_alternated: float


def send(url: str, model: str, prompt: str, max_tokens: int) -> Sent:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": max_tokens, "temperature": 0}).encode()
    request = urllib.request.Request(f"{url}/v1/chat/completions", body, {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(request, timeout=300) as response:
        answer = json.load(response)
    return int(answer["usage"]["completion_tokens"]), time.perf_counter() - t0


def rate(sent: list[Sent]) -> float:
    return sum(t for t, _ in sent) / sum(s for _, s in sent)


def per_request_sd(a: list[Sent], b: list[Sent]) -> float:
    return statistics.pstdev([(tb / sb) / (ta / sa) for (ta, sa), (tb, sb) in zip(a, b, strict=True)])


def blocked_round(urls: list[str], model: str, prompts: list[str], order: list[int], max_tokens: int
                  ) -> dict[int, list[Sent]]:
    """Every prompt to one configuration, then every prompt to the other (as a demo round runs its cells)."""
    return {side: [send(urls[side], model, p, max_tokens) for p in prompts] for side in order}


def alternated_round(urls: list[str], model: str, prompts: list[str], order: list[int], max_tokens: int
                     ) -> dict[int, list[Sent]]:
    """Each prompt to both configurations, one right after the other, the first of the two alternating."""
    sent: dict[int, list[Sent]] = {0: [], 1: []}
    for i, p in enumerate(prompts):
        for side in order if i % 2 == 0 else order[::-1]:
            sent[side].append(send(urls[side], model, p, max_tokens))
    return sent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ks", default="2,4", help="A,B: the draft model's K on each server (0: speculation off)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--prompts", type=int, default=12, help="first turns of the demo's workload sent per round")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--out", type=Path, required=True, help="a directory for the servers' logs and rounds.json")
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    if len(ks) != 2:
        ap.error("--ks takes two values: A,B")
    args.out.mkdir(parents=True, exist_ok=True)
    load = LoadSpec(num_prompts=args.prompts, max_tokens=args.max_tokens, temperature=0.0)
    convs, _ = load_conversations("sample", None, load)
    prompts = [c.turns[0] for c in convs[: args.prompts]]
    engine, launcher = demo_engine(), get_engine("vllm").launcher
    model = str(engine.model)
    with ExitStack() as stack:
        urls = []
        for k in ks:  # one after the other: two starts side by side compile the same model twice on 2 cores
            spec = SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=k,
                              draft_model=str(models_dir() / DRAFT)) if k else SpecConfig()
            server = LaunchedServer(launcher, engine, spec, args.out / f"server-k{k}.log")
            stack.callback(server.stop)
            t0 = time.monotonic()
            server.start()
            print(f"K = {k} serving after {time.monotonic() - t0:.0f} s", flush=True)
            urls.append(server.base_url)
        for url in urls:
            for prompt in prompts[:2]:
                send(url, model, prompt, 16)  # warm-up, as the demo's rounds have
        rounds = []
        for r in range(args.rounds):
            order = [0, 1] if r % 2 == 0 else [1, 0]  # which configuration goes first changes every round
            designs = (blocked_round, alternated_round) if r % 2 == 0 else (alternated_round, blocked_round)
            sent = {design: design(urls, model, prompts, order, args.max_tokens) for design in designs}
            blocked, alternated = sent[blocked_round], sent[alternated_round]
            row = Round(r, rate(blocked[1]) / rate(blocked[0]), rate(alternated[1]) / rate(alternated[0]),
                        rate(blocked[0]), rate(alternated[0]), per_request_sd(blocked[0], blocked[1]),
                        per_request_sd(alternated[0], alternated[1]))
            rounds.append(row)
            print(f"round {r}: blocked {row.blocked:.3f}, alternated {row.alternated:.3f}", flush=True)
    (args.out / "rounds.json").write_text(json.dumps([asdict(x) for x in rounds], indent=1))
    a, b = f"K = {ks[0]}", f"K = {ks[1]}"
    print(f"\n{b} over {a}, concurrency 1, {args.prompts} prompts x {args.max_tokens} tokens a round\n")
    print("| round | blocked | alternated | A tok/s (blocked) | A tok/s (alternated) | per-request sd (blocked) "
          "| per-request sd (alternated) |")
    print("|---|---|---|---|---|---|---|")
    for x in rounds:
        print(f"| {x.index} | {x.blocked:.3f} | {x.alternated:.3f} | {x.a_blocked:.1f} | {x.a_alternated:.1f} "
              f"| {x.per_request_sd_blocked:.3f} | {x.per_request_sd_alternated:.3f} |")
    sd_b = statistics.stdev(x.blocked for x in rounds)
    sd_a = statistics.stdev(x.alternated for x in rounds)
    print(f"\nround-to-round sd of the ratio: blocked {sd_b:.3f}, alternated {sd_a:.3f} "
          f"(alternated / blocked: {sd_a / sd_b:.2f}x)")
    within = statistics.median(x.per_request_sd_alternated for x in rounds) / args.prompts ** 0.5
    print(f"what per-request noise alone gives a round (median per-request sd / sqrt(prompts)): {within:.3f}")


if __name__ == "__main__":
    main()
