#!/usr/bin/env bash
# Set up (first time only) and run the harness: bash scripts/run.sh [hydra overrides...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
exec python -m harness "$@"
