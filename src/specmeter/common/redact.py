"""Secrets never reach results, logs or stdout: argv and environment as they may be written down, and whatever a
server sent back (a stream, a payload, a scrape) should it echo the key."""

from __future__ import annotations

from typing import Any

SECRET_ENV_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """Environment for the record: values of secret-looking variables replaced."""
    return {k: "***" if any(w in k.upper() for w in SECRET_ENV_WORDS) else v for k, v in env.items()}


def redact_argv(argv: list[str], secret_flags: tuple[str, ...] = ("--api-key",)) -> list[str]:
    """The command line with secret flag values replaced, safe to write into results."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        if any(arg == f or arg.endswith("=" + f) for f in secret_flags):  # --api-key, --engine-arg=--api-key
            out.append(arg)
            hide_next = True
            continue
        for f in secret_flags:  # --api-key=KEY, --engine-arg=--api-key=KEY
            i = arg.find(f + "=")
            if i >= 0:
                arg = arg[: i + len(f) + 1] + "***"
        out.append(arg)
    return out


def scrub(value: Any, secret: str | None) -> Any:
    """`value` (text, or JSON-like dicts and lists of it) with every occurrence of `secret` replaced: a server that
    echoes the Authorization header puts the key in what specmeter would write down."""
    if not secret:
        return value
    if isinstance(value, str):
        return value.replace(secret, "***") if secret in value else value
    if isinstance(value, dict):
        return {scrub(k, secret): scrub(v, secret) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, secret) for v in value]
    return value
