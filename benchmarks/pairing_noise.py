"""Where a round's noise comes from: two configurations at concurrency 1, compared round after round with each
round's requests sent three ways, on the demo's own servers and prompts:

- blocked: all of one configuration's requests, then all of the other's, as interleaved cells ran before
  load/turns.py (and still do past a server's batch capacity);
- alternated: the two request by request (the same prompt to each, one right after the other), which cancels
  drift (the machine a little slower for a minute) if drift is what moves the rounds; interleaved rounds at
  concurrency 1 now run so;
- settled: alternated, with a pause of --settle seconds after each request. A vLLM CPU server's worker process
  (where it has one: engines/vllm.py CPU_SERVER_ENV runs the model in the engine core instead) keeps polling its
  queue for a second after its last step (vllm/distributed/device_communicators/shm_broadcast.py, SpinCondition's
  busy loop), on the core every server's worker is pinned to; while the servers ran in sessions
  of their own (each scheduled by Linux as one group), a request sent to the other server within that second ran at
  half speed. The pause lets the worker go idle first, so a handover cost shows as the difference between the two.

Per round and design it reports the ratio B / A of output throughput (tokens over the requests' summed end-to-end
time); then per design the standard deviation of those ratios across rounds, the median per-request spread within
a round, and B's rate on the requests it received right after one of A's against the rest (a handover cost shows
there). The requests themselves are kept in rounds.json.

Run (about 8 minutes on 2 cores: two server starts, then the rounds; nothing else should run meanwhile):
    .venv/bin/python benchmarks/pairing_noise.py --ks 2,4 --rounds 3 --out runs/bench-pairing
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from specmeter.config.models import LoadSpec, SpecConfig, SpecMethod
from specmeter.data.workload import load_conversations
from specmeter.engines.launcher import LaunchedServer
from specmeter.engines.registry import get_engine
from specmeter.plans.demo import DRAFT, demo_engine, models_dir

Sent = tuple[int, float, bool]  # (output tokens, end-to-end seconds, sent right after the other server's request)
Send = Callable[[int, str], tuple[int, float]]  # (side, prompt) -> (output tokens, seconds)
Design = Callable[[Send, list[str], list[int]], dict[int, list[Sent]]]


@dataclass
class Measured:
    """One design's round: each side's requests, in prompt order."""

    round: int
    design: str
    sent: dict[int, list[Sent]]

    @property
    def ratio(self) -> float:
        return rate(self.sent[1]) / rate(self.sent[0])

    @property
    def per_request_sd(self) -> float:
        """Spread of the per-request ratios B / A (the same prompt on both sides)."""
        return statistics.pstdev([(b[0] / b[1]) / (a[0] / a[1]) for a, b in zip(self.sent[0], self.sent[1],
                                                                                   strict=True)])


def send(url: str, model: str, prompt: str, max_tokens: int) -> tuple[int, float]:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": max_tokens, "temperature": 0}).encode()
    request = urllib.request.Request(f"{url}/v1/chat/completions", body, {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(request, timeout=300) as response:
        answer = json.load(response)
    return int(answer["usage"]["completion_tokens"]), time.perf_counter() - t0


def rate(sent: list[Sent]) -> float:
    return sum(s[0] for s in sent) / sum(s[1] for s in sent)


def blocked(send_to: Send, prompts: list[str], order: list[int]) -> dict[int, list[Sent]]:
    """Every prompt to one configuration, then every prompt to the other (as a demo round runs its cells)."""
    out: dict[int, list[Sent]] = {}
    for n, side in enumerate(order):
        out[side] = [(*send_to(side, p), n > 0 and i == 0) for i, p in enumerate(prompts)]
    return out


def alternated(send_to: Send, prompts: list[str], order: list[int], settle_s: float = 0.0) -> dict[int, list[Sent]]:
    """Each prompt to both configurations, one right after the other, the first of the two alternating; with
    `settle_s`, a pause after every request."""
    out: dict[int, list[Sent]] = {0: [], 1: []}
    last: int | None = None
    for i, p in enumerate(prompts):
        for side in order if i % 2 == 0 else order[::-1]:
            out[side].append((*send_to(side, p), not settle_s and last is not None and last != side))
            last = side
            time.sleep(settle_s)
    return out


def handover(measured: list[Measured]) -> tuple[float | None, float | None]:
    """B's rate on requests sent right after one of A's, and on the rest (None: it had none)."""
    after = [s for m in measured for s in m.sent[1] if s[2]]
    rest = [s for m in measured for s in m.sent[1] if not s[2]]
    return (rate(after) if after else None), (rate(rest) if rest else None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ks", default="2,4", help="A,B: the draft model's K on each server (0: speculation off)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=12, help="first turns of the demo's workload sent per round")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--settle", type=float, default=1.5, help="seconds of pause after each request (settled)")
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
    designs: dict[str, Design] = {"blocked": blocked, "alternated": alternated,
                                  "settled": partial(alternated, settle_s=args.settle)}
    measured: list[Measured] = []
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

        def send_to(side: int, prompt: str, max_tokens: int = args.max_tokens) -> tuple[int, float]:
            return send(urls[side], model, prompt, max_tokens)

        for side in (0, 1):
            for prompt in prompts[:2]:
                send_to(side, prompt, 16)  # warm-up, as the demo's rounds have
        names = list(designs)
        for r in range(args.rounds):
            order = [0, 1] if r % 2 == 0 else [1, 0]  # which configuration goes first changes every round
            for name in names[r % len(names):] + names[: r % len(names)]:  # and which design
                measured.append(Measured(r, name, designs[name](send_to, prompts, order)))
                time.sleep(args.settle)
                print(f"round {r}, {name}: {measured[-1].ratio:.3f}", flush=True)
    (args.out / "rounds.json").write_text(json.dumps([asdict(m) for m in measured], indent=1))
    print(f"\nK = {ks[1]} over K = {ks[0]}, concurrency 1, {args.prompts} prompts x {args.max_tokens} tokens a round"
          f" (settled: {args.settle:g} s after each request)\n")
    print("| design | ratio per round | sd across rounds | per-request sd (median) | B right after A | B otherwise |")
    print("|---|---|---|---|---|---|")
    for name in names:
        ms = [m for m in measured if m.design == name]
        after, rest = handover(ms)
        print(f"| {name} | {', '.join(f'{m.ratio:.3f}' for m in ms)} | {statistics.stdev(m.ratio for m in ms):.3f} "
              f"| {statistics.median(m.per_request_sd for m in ms):.3f} "
              f"| {'-' if after is None else f'{after:.1f} tok/s'} | {'-' if rest is None else f'{rest:.1f} tok/s'} |")


if __name__ == "__main__":
    main()
