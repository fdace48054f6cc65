"""What the engine tells about itself while a point runs, read raw: Prometheus scrapes, the running-batch
gauge, and clear-on-read iteration feeds. Reading is here; what the readings mean is metrics'."""
