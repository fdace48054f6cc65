"""Production traces: when each request of a real service arrived and how long it was, read from the formats the
owners published (docs/traces.md). model: the row every reader produces and the trace that holds them; formats:
which format a file is and the one entry point that reads it; mooncake, bailian, burstgpt, azure: one reader each;
timing: a window of a trace and its time scale;
content: the real text each row is sent with."""
