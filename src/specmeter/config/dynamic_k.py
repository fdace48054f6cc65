"""vLLM's dynamic K (`num_speculative_tokens_per_batch_size`): the rules a table must follow, and the K it
drafts at a batch size. Pure functions, below config (which validates a table with them)."""

from __future__ import annotations


def validate_dynamic_k(table: list[tuple[int, int, int]], k_max: int) -> None:
    """vLLM's rules: inclusive [start, end] ranges, first starts at 1, contiguous, 0 <= K <= K_max."""
    if not table:
        raise ValueError("num_speculative_tokens_per_batch_size must not be empty")
    expected_start = 1
    for start, end, k in table:
        if start != expected_start:
            raise ValueError(
                f"num_speculative_tokens_per_batch_size: range [{start}, {end}] must start at "
                f"{expected_start} (ranges are inclusive, contiguous and begin at batch size 1)"
            )
        if end < start:
            raise ValueError(f"num_speculative_tokens_per_batch_size: range [{start}, {end}] ends before it starts")
        if not 0 <= k <= k_max:
            raise ValueError(
                f"num_speculative_tokens_per_batch_size: K={k} for [{start}, {end}] must be in "
                f"[0, num_speculative_tokens={k_max}]"
            )
        expected_start = end + 1


def dynamic_k_at(table: list[tuple[int, int, int]], batch: int, k_max: int) -> int:
    """The K vLLM drafts at `batch` running requests under `table`: past the last range the last K carries on."""
    k = table[0][2]
    for start, _end, range_k in table:
        if batch >= start:
            k = range_k
    return min(k, k_max)
