"""What an engine counts, per engine replica, and the Prometheus text format the personalities render it in."""

from __future__ import annotations

from dataclasses import dataclass, field

FINISH_REASONS = ("stop", "length", "abort")


@dataclass
class Counters:
    """One engine replica's counters since its (re)start, plus the requests it is streaming right now."""

    k: int
    tree: bool = False  # steps draft trees: drafted tokens are nodes, so no count per drafted position
    drafts: int = 0  # speculative steps (verify calls)
    draft_tokens: int = 0
    accepted: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    draft_per_pos: list[int] = field(default_factory=list)
    success: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FINISH_REASONS, 0))
    generation_tokens: int = 0
    prompt_tokens: int = 0
    running: int = 0

    def __post_init__(self) -> None:
        self.accepted_per_pos = self.accepted_per_pos or [0] * self.k
        self.draft_per_pos = self.draft_per_pos or [0] * self.k

    def add_steps(self, accepted: list[int], drafted: list[int]) -> None:
        for a, d in zip(accepted, drafted):
            if d <= 0:  # nothing drafted: a plain decode step, not counted
                continue
            self.drafts += 1
            self.draft_tokens += d
            self.accepted += a
            for i in range(a):
                self.accepted_per_pos[i] += 1
            for i in range(0 if self.tree else d):
                self.draft_per_pos[i] += 1

    @property
    def finished(self) -> int:
        return sum(self.success.values())


Labels = dict[str, str]


class Exposition:
    """Prometheus text, family by family. Counters get the `_total` suffix and, like prometheus_client
    writes them, a `_created` twin unless `created` is None (hand-written exporters such as llama-server's)."""

    def __init__(self, created: float | None) -> None:
        self.created = created
        self.lines: list[str] = []

    @staticmethod
    def _series(name: str, labels: Labels) -> str:
        if not labels:
            return name
        return name + "{" + ",".join(f'{key}="{val}"' for key, val in labels.items()) + "}"

    def counter(self, name: str, help_: str, samples: list[tuple[Labels, float]]) -> None:
        self.lines += [f"# HELP {name}_total {help_}", f"# TYPE {name}_total counter"]
        self.lines += [f"{self._series(name + '_total', lab)} {float(v)!r}" for lab, v in samples]
        if self.created is not None:
            self.lines += [f"# HELP {name}_created {help_}", f"# TYPE {name}_created gauge"]
            self.lines += [f"{self._series(name + '_created', lab)} {self.created!r}" for lab, _ in samples]

    def gauge(self, name: str, help_: str, samples: list[tuple[Labels, float]]) -> None:
        self.lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
        self.lines += [f"{self._series(name, lab)} {float(v)!r}" for lab, v in samples]

    def histogram(self, name: str, help_: str, samples: list[tuple[Labels, int, float]]) -> None:
        """A histogram whose observations all fell in its lowest bucket: (labels, count, sum) per series."""
        self.lines += [f"# HELP {name} {help_}", f"# TYPE {name} histogram"]
        for lab, n, total in samples:
            for le in ("0.3", "1.0", "+Inf"):
                self.lines.append(f"{self._series(name + '_bucket', {**lab, 'le': le})} {float(n)!r}")
            self.lines.append(f"{self._series(name + '_count', lab)} {float(n)!r}")
            self.lines.append(f"{self._series(name + '_sum', lab)} {total!r}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
