"""Executing a plan: the runner, the servers' lifecycle, the order of cells, rounds, the load ramp and the load
search."""
