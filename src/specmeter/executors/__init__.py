"""Where a plan's cells run. Locally (the default) workflows/execute.py runs the plan in this process. On Slurm the
driver splits the plan into job groups that must share a node for a fair comparison, submits each as a job that
runs the same local execution inside its allocation, watches and resubmits them, and merges their run directories
into the run's own."""
