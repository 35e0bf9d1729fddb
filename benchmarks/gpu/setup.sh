#!/usr/bin/env bash
# The GPU check's set-up (benchmarks/gpu/check.sh runs it as its first step, under its own time limit;
# benchmarks/gpu/rehearse.sh runs it on a fresh interpreter here):
#
#   bash benchmarks/gpu/setup.sh <python> <site> <models> <full|tiny> <OUT> <device> [<wheels folder>]
#
# 1. The carried wheels laid over <python>, as the GPU machine's notes say to (its python3 holds torch and the
#    rest; nothing can be fetched there): pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade
#    --target <site> <wheels>/*.whl. Every step then runs with PYTHONPATH=<site>:<repo>, so the carried
#    transformers, sentence-transformers, tokenizers, hydra, datasets... come before the interpreter's own and torch,
#    numpy, scipy, pandas, pyarrow, safetensors and huggingface-hub are the interpreter's. Two wheels of one
#    package stop pip: refused first, on one line. Skipped where <site> already holds these wheels (a second call
#    on the same machine) and where no wheels folder is given (the CPU dry run in CI: the interpreter's packages).
# 2. benchmarks/gpu/make_models.py <models> --shape <full|tiny> (skipped where <models> already holds them).
# 3. benchmarks/gpu/versions.py: the set-up's figure, each library's version and where it was loaded from.
set -u
[ $# -ge 6 ] || { echo "usage: bash benchmarks/gpu/setup.sh <python> <site> <models> <full|tiny> <OUT> <device> [<wheels>]"; exit 2; }
PY=$1 SITE=$2 MODELS=$3 SHAPE=$4 OUT=$5 DEVICE=$6 WHL=${7:-}
ROOT=$PWD
mkdir -p "$SITE" "$MODELS" "$OUT"
if [ -n "$WHL" ]; then
  wheels=$(ls "$WHL"/*.whl 2>/dev/null)
  [ -n "$wheels" ] || { echo "error: no wheels in $WHL: run bash benchmarks/gpu/prepare.sh first"; exit 2; }
  twice=$(for w in $wheels; do basename "$w" | cut -d- -f1 | tr 'A-Z.-' 'a-z__'; done | sort | uniq -d | tr '\n' ' ')
  [ -z "$twice" ] || { echo "error: two wheels of ${twice% } in $WHL stop pip: run bash benchmarks/gpu/prepare.sh again (it empties $WHL first)"; exit 2; }
  stamp=$(for w in $wheels; do basename "$w"; done | sort | tr '\n' ' ')
  if [ "$(cat "$SITE/.wheels" 2>/dev/null)" != "$stamp" ]; then
    t=$(date +%s)
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" $wheels || exit 3
    echo "$stamp" > "$SITE/.wheels"
    echo "wheels: $(echo "$wheels" | wc -w) from $WHL installed into $SITE in $(( $(date +%s) - t )) s"
  else
    echo "wheels: $SITE already holds the $(echo "$wheels" | wc -w) wheels of $WHL"
  fi
else
  echo "wheels: none given, the interpreter's own packages"
fi
export PYTHONPATH=$SITE:$ROOT
if [ -f "$MODELS/mb/model.safetensors" ] && [ -f "$MODELS/minilm/model.safetensors" ]; then
  echo "models: already in $MODELS"
else
  t=$(date +%s)
  "$PY" benchmarks/gpu/make_models.py "$MODELS" --shape "$SHAPE" || exit 3
  echo "models: made in $(( $(date +%s) - t )) s"
fi
"$PY" benchmarks/gpu/versions.py "$OUT" "$DEVICE" "$SITE"
