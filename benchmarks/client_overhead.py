"""How much does the load generator itself distort what it measures, at hundreds of streams?

A paced SSE server (separate process, so it does not share the client's event loop) streams every
request as `--chunks` chunks exactly `--gap-ms` apart. specmeter's real client then drives it at
1 and at `--streams` concurrent streams. Reported as ratios measured in one run:
  - ICL fidelity: client-measured median inter-chunk gap / the server's true gap (1.00 is perfect);
  - p99 fidelity: client-measured p99 gap / true gap (tail distortion under load);
  - capacity: chunks/s the client parsed / chunks/s the server offered;
  - CPU headroom: one core-second / the client's own CPU time (process time, the server runs in
    another process) needed for one second of the offered chunk rate. Above 1 the client keeps up on
    one core; the fidelity ratios then measure the machine, not specmeter.
Run: .venv/bin/python benchmarks/client_overhead.py [--streams 256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import socket
import time

from aiohttp import web


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(port: int, chunks: int, gap_s: float) -> None:
    async def models(_: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "paced"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        t0 = time.perf_counter()
        for i in range(chunks):
            # Pace against absolute times so the offered gap does not drift under load.
            delay = t0 + i * gap_s - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            usage = {"prompt_tokens": 8, "completion_tokens": i + 1, "total_tokens": 9 + i}
            ev = {"choices": [{"index": 0, "delta": {"content": "tok "}, "finish_reason": None}], "usage": usage}
            await resp.write(f"data: {json.dumps(ev)}\n\n".encode())
        final = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": chunks, "total_tokens": 8 + chunks}}
        await resp.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
        return resp

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


async def _drive(url: str, streams: int, requests_per_stream: int) -> tuple[list[float], int, float, float]:
    from specmeter.data.model import Conversation
    from specmeter.config import LoadSpec
    from specmeter.engines.vllm import VLLMAdapter
    from specmeter.load.client import OpenAIClient
    from specmeter.load.scheduler import run_level

    convs = [Conversation(id=f"c{i}", turns=["hi"]) for i in range(streams * requests_per_stream)]
    load = LoadSpec(max_tokens=10_000, max_error_rate=0.0)
    async with OpenAIClient(url, VLLMAdapter()) as client:
        cpu0 = time.process_time()
        level = await run_level(client, convs, streams, load, "paced", "bench", lambda r: None)
        cpu = time.process_time() - cpu0
    gaps = [g for r in level.records for g in r.inter_chunk_gaps()]
    chunks = sum(len(r.chunk_offsets_s) for r in level.records)
    assert all(r.ok for r in level.records), [r.error for r in level.records if not r.ok][:3]
    return gaps, chunks, level.wall_s, cpu


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--chunks", type=int, default=100)
    ap.add_argument("--gap-ms", type=float, default=20.0)
    args = ap.parse_args()
    port = _free_port()
    gap_s = args.gap_ms / 1000
    server = mp.Process(target=_serve, args=(port, args.chunks, gap_s), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        rows = []
        for streams in (1, args.streams):
            gaps, chunks, wall, cpu = asyncio.run(_drive(url, streams, 2 if streams == 1 else 1))
            offered = streams * (1 / gap_s)
            rows.append({
                "streams": streams,
                "client_cpu_us_per_chunk": 1e6 * cpu / chunks,
                "cpu_headroom_ratio": 1.0 / (cpu / chunks * offered),
                "icl_p50_ratio": _pct(gaps, 0.5) / gap_s,
                "icl_p99_ratio": _pct(gaps, 0.99) / gap_s,
                "capacity_ratio": (chunks / wall) / offered,
            })
        print(json.dumps({"gap_ms": args.gap_ms, "chunks_per_request": args.chunks, "results": rows}, indent=2))
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
