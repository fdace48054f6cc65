"""specmeter: measure speculative decoding on real serving engines and say what to deploy."""

__version__ = "0.1.0"
