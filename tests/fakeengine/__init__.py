"""One fake engine for every test and benchmark that needs a server it can control.

- server.FakeEngine: an OpenAI-compatible streaming server in a thread of the test process, generating
  deterministic speculative steps and counting them as an engine does, with per-request and server-wide
  faults (faults.py); steps.py holds the generation and the truth it is checked against.
- personalities: vllm.VLLM (the default), sglang.SGLang, trtllm.TensorRTLLM, llamacpp.LlamaCpp shape
  /v1/models, the statistics endpoints, the stream and the per-request SD numbers like each engine.
- paced.py: pacing, a separate low-overhead process streaming on a fixed schedule and logging its send
  times (benchmarks/client_overhead.py measures clients against it); chunks.py: the OpenAI chunk shapes both share.
- threaded.py: serving any aiohttp app from a test (a thread, or the running loop); drive.py: running
  specmeter against a fake (attach-mode plans, a recording reporter).

tests/conftest.py puts tests/ on sys.path, so tests import `fakeengine.<module>`; fixtures that start a fake
live in tests/unit/conftest.py. This file imports nothing, so the paced server starts without aiohttp.
"""
