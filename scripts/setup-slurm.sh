#!/usr/bin/env bash
# Debian's Slurm (slurm-wlm: slurmctld, slurmd) and munge, for the test that runs a sweep on a one-node Slurm
# cluster on this machine (tests/integration/slurm_cluster.py configures and starts it, as root). Only the test
# command needs it. Idempotent: nothing to do once slurmctld, slurmd and munged exist.
set -euo pipefail
if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "setup-slurm: no apt-get here; install Slurm (slurmctld, slurmd, sbatch) and munge" >&2
  exit 2
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "setup-slurm: installing Debian's slurm-wlm and munge (about 15 s)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq slurm-wlm munge >/dev/null
