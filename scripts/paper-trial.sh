#!/usr/bin/env bash
# The shrunk paper graph on toy data, end to end, in one command (set-up included):
#   bash scripts/paper-trial.sh              # on this machine (about a minute)
#   bash scripts/paper-trial.sh slurm        # submitted to SLURM (bash slurm/local-cluster.sh start gives a cluster)
#   bash scripts/paper-trial.sh slurm --status
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} HF_DATASETS_OFFLINE=${HF_DATASETS_OFFLINE:-1}
exec python -m harness.trial "$@"
