#!/usr/bin/env bash
# The GPU check of the unpadded path (issues 39 and 46): ONE call, done within 540 s on an H100 or H200 (the
# deadline below: 530 s for the steps and 10 s for the summary; the machine's start is not counted). Prepared on a
# machine with the package registries by benchmarks/gpu/prepare.sh (.whl/ and .gpu/ beside the checkout); run from
# the repository root on the GPU machine:
#
#   bash benchmarks/gpu/check.sh            # results, logs and summary.txt in $OUT (default ./gpu-out)
#   bash benchmarks/gpu/check.sh --cpu      # a dry run on any machine: tiny shapes, every step and the summary
#                                           # (tests/test_gpu_check.py runs it); no .whl/ or .gpu/ needed
#
# Steps, in the issue's order, each in its own process under its own time limit (cut to what the deadline leaves):
# window (the window probe), efficiency (Table 2's four sets, fp32: harness beside the notebook-style loop),
# bf16 (short fixed: autocast, bf16 weights, torch.compile), retrieval (SciFact, MiniLM's shape, bf16: harness
# beside sentence-transformers, GPU busy from CUDA events), parity (per-text max |diff|, packed vs padded, fp32),
# gradients (a 2-layer model of ModernBERT-base's shape), records (the harness' own task=efficiency and task=beir
# records). Each figure is appended to $OUT/figures.jsonl the moment it is measured, each step's log is written to
# $OUT/<step>.log as it runs, and the summary ($OUT/summary.txt, one line per figure with the GPU, torch and the
# attention kernel counted) is written by the exit trap: also when a step or the whole call is cut off.
# On the GPU machine: python3 with torch+CUDA, numpy, scipy, scikit-learn, pandas, pyarrow, safetensors,
# huggingface-hub; the rest comes from .whl/.
set -u
ROOT=$PWD; OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"; PY=${PYTHON:-python3}
DRY=0; [ "${1:-}" = "--cpu" ] && DRY=1
T0=$(date +%s); DEADLINE=$((T0 + ${CHECK_SECONDS:-530}))
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
: > "$OUT/figures.jsonl"; : > "$OUT/steps.jsonl"
finish() {
  "$PY" benchmarks/gpu/summary.py "$OUT" $([ $DRY = 1 ] && echo --dry-run) > "$OUT/summary.txt" 2>&1
  echo "total $(( $(date +%s) - T0 )) s (deadline $(( DEADLINE - T0 )) s + the summary)" >> "$OUT/summary.txt"
  cat "$OUT/summary.txt"
}
trap finish EXIT
trap 'exit 143' TERM INT

step() {   # step <name> <time limit, s> <command...>: run under min(limit, what the deadline leaves), log, record
  local name=$1 limit=$2; shift 2
  local left=$(( DEADLINE - $(date +%s) )); local t=$(( limit < left ? limit : left ))
  if [ "$t" -lt 5 ]; then echo "== $name: not started, the check's deadline"; return; fi
  echo "== $name (time limit $t s)"; local s=$(date +%s)
  timeout -k 5 "$t" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  "$PY" - "$OUT" "$name" "$rc" "$(( $(date +%s) - s ))" "$t" <<'EOF'
import json, pathlib, sys
out, name, rc, seconds, limit = sys.argv[1:]
log = [l for l in (pathlib.Path(out) / f"{name}.log").read_text(errors="replace").splitlines() if l.strip()]
with open(pathlib.Path(out) / "steps.jsonl", "a") as fh:
    fh.write(json.dumps({"step": name, "rc": int(rc), "seconds": int(seconds), "limit": int(limit),
                         "last": log[-1][:300] if log else ""}) + "\n")
EOF
  echo "rc=$rc after $(( $(date +%s) - s )) s"; grep "^\[$name\]" "$OUT/$name.log" | tail -12
}

B=benchmarks/gpu_unpadded.py
if [ $DRY = 1 ]; then
  export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  DATA=${CHECK_DATA:-$ROOT/../shared/data/scifact}
  [ -f "$DATA/corpus.jsonl" ] || { echo "error: no BEIR folder at $DATA: set CHECK_DATA=<folder with corpus.jsonl>"; exit 2; }
  A="--device cpu --shrink 16 --out $OUT"; MB=""; MB2=""; MINILM=""; PREC=fp32
  EFF="--n-short 8 --n-long 2"; BF16="--n-short 8 --compile-backend eager"
  RET="--n-docs 16 --st-batch-sizes 32 --repeats 1"; PAR="--parity-docs 16"
  TASK_MODEL="model.path=$ROOT/tests/fixtures/tiny-modernbert model.max_length=512"; TASK_N=4
  BEIR="model=modernbert-base $TASK_MODEL task.max_docs=30 task.max_queries=10 task.data_dir=$(dirname "$DATA")"
  DEVICE=cpu
else
  [ -d .whl ] && [ -d .gpu ] || { echo "error: .whl/ and .gpu/ are missing: run bash benchmarks/gpu/prepare.sh first"; exit 2; }
  t=$(date +%s)
  [ -d /tmp/site/transformers ] || "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$ROOT
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
  [ -f /tmp/mb/model.safetensors ] && [ -f /tmp/minilm/model.safetensors ] || \
    "$PY" benchmarks/gpu/make_models.py "$ROOT/.gpu" > "$OUT/setup.log" 2>&1 || { tail -5 "$OUT/setup.log"; exit 3; }
  echo "set-up $(( $(date +%s) - t )) s"
  DATA=$ROOT/.gpu/data/scifact
  A="--device cuda --out $OUT"; MB="--model-dir /tmp/mb"; MB2="--random base2"; MINILM="--model-dir /tmp/minilm"
  PREC=bf16; EFF="--n-short 512 --n-long 32 --tf32"; BF16="--n-short 1024"; RET="--repeats 2"; PAR="--parity-docs 64"
  TASK_MODEL="model.path=/tmp/mb"; TASK_N=512
  BEIR="model=all-minilm-l6-v2 model.path=/tmp/minilm model.attn_implementation=auto task.data_dir=$ROOT/.gpu/data"
  DEVICE=cuda
fi
at() { echo "paths.results=$OUT/records/$1 paths.outputs=/tmp/check-o/$1 paths.cache=/tmp/check-c/$1 hydra.run.dir=/tmp/check-h/$1"; }

step window 45 "$PY" $B window $A
step efficiency 150 "$PY" $B efficiency $A $MB $EFF
step bf16 110 "$PY" $B bf16 $A $MB $BF16
step retrieval 90 "$PY" $B retrieval $A $MINILM --data "$DATA" --precision $PREC $RET
step parity 40 "$PY" $B parity $A $MB $PAR
step gradients 45 "$PY" $B gradients $A $MB2
rm -rf "$OUT/records" /tmp/check-c
step records 90 bash -c "$PY -m harness $(at eff) task=efficiency model=modernbert-base $TASK_MODEL device=$DEVICE \
  'task.datasets=[short_fixed,short_variable]' task.n_docs=$TASK_N task.repeats=2 task.max_batch.search=false; \
  $PY -m harness $(at beir) task=beir $BEIR precision=$PREC device=$DEVICE task.train=false 'task.datasets=[scifact]'; \
  $PY benchmarks/gpu/records.py $OUT/records $OUT $DEVICE"
