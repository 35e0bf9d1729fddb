#!/usr/bin/env bash
# Set up (first time only) and run the whole test suite offline, slow real-data and SLURM tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Headless Chromium + chromedriver for the leaderboard page test (Debian packages).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null
  else
    echo "warning: chromium/chromedriver absent and cannot be installed; the browser test will be skipped" >&2
  fi
fi
# A single-node SLURM cluster for the `slurm` tests (Debian's slurm-wlm + munge; ~22 s to install). Without root
# and apt, or if it does not start, those tests are skipped with the reason.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  bash slurm/local-cluster.sh start >/dev/null 2>&1 \
    || echo "warning: the local SLURM cluster did not start (slurm/local-cluster.sh); the slurm tests will be skipped" >&2
fi
. .venv/bin/activate
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
ruff check harness tests benchmarks
# Two workers (HARNESS_TEST_WORKERS; 0 runs in this process), one test module each at a time, longest first
# (tests/conftest.py); torch uses one thread per worker so two workers do not fight over two cores.
workers=${HARNESS_TEST_WORKERS:-2}
if [ "$workers" -gt 0 ]; then
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  exec python -m pytest -n "$workers" --dist loadfile "$@"
fi
exec python -m pytest "$@"
