"""The parts of benchmarks/client_overhead.py: what is measured (measures), the tools (tools), running them
against the paced server (processes), and the tables (output)."""
