"""The run directory: what a run measured and decided, each written once (the answer's rounds)."""
