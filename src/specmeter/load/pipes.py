"""The pipes between a load point's parent process and its client processes (load/workers.py): the job each
process gets, the clock both sides must share, and the frames on the pipes: a 4-byte big-endian length, then a
pickle (parent and children are the same program: nothing else ever writes to these pipes; a child's stray
prints go to its stderr)."""

from __future__ import annotations

import asyncio
import pickle
import struct
import time
from dataclasses import dataclass
from typing import Any

from specmeter.config.models import LoadPoint, LoadSpec
from specmeter.data.model import Conversation
from specmeter.load.replicas import ReplicaSettings
from specmeter.load.traffic import PointKey

STOP_TIMEOUT_S = 30.0  # for processes told to stop to send what finished and exit
_HEADER = struct.Struct("!I")


@dataclass(frozen=True)
class WorkerJob:
    """Everything one client process needs, sent to it pickled before the point starts."""

    index: int
    processes: int
    slots: int | None  # this process's share of the point's slots
    client: ReplicaSettings
    point: LoadPoint
    conversations: list[Conversation]
    load: LoadSpec
    model: str
    key: PointKey
    warmup: bool
    skip: frozenset[str]


def clock_name() -> str:
    return time.get_clock_info("perf_counter").implementation


def frame(message: tuple[Any, ...]) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


async def read_frame(reader: asyncio.StreamReader) -> tuple[Any, ...] | None:
    """The next message, or None at a clean end of the stream."""
    try:
        head = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        return None
    (size,) = _HEADER.unpack(head)
    message = pickle.loads(await reader.readexactly(size))
    assert isinstance(message, tuple) and message, f"not a message: {message!r}"
    return message
