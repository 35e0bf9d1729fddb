#!/usr/bin/env bash
# The GPU check of the unpadded path (issues 39, 46 and 54): ONE call with a deadline. Prepared on a machine with
# the package registries by benchmarks/gpu/prepare.sh (.whl/ and .gpu/ beside the checkout, carried to the GPU
# machine); rehearsed end to end on a CPU by benchmarks/gpu/rehearse.sh. Run from the repository root:
#
#   CHECK_SECONDS=<s> bash benchmarks/gpu/check.sh   # on the GPU machine: four files in $OUT (default ./gpu-out)
#   bash benchmarks/gpu/check.sh --cpu               # a dry run on any machine: tiny shapes, every step and the
#                                                    # summary (tests/test_gpu_check.py runs it); no .whl/ or .gpu/
#
# The deadline is CHECK_SECONDS after the start (the caller passes the device time it has left, less the machine's
# start, the transfers and about 20 s for the summary; 530 s when unset, said in the summary). The GPU machine
# returns at most 8 files from $OUT, none more than 2 folders down (the device tool's README), so the check writes
# exactly four, all at the top of $OUT, each as it goes:
#   figures.jsonl  one line per figure the moment it is measured (benchmarks/gpu/figures.py)
#   steps.jsonl    one line per step as it ends: exit code, seconds, time limit, the last line of its log
#   logs.tar.gz    every step's log, gpu.txt (nvidia-smi) and the harness' task records, rewritten after each step
#                  (read it with: tar -xzf logs.tar.gz && less logs/efficiency.log; records/ holds the records)
#   summary.txt    written by the exit trap, also when a step or the whole call is cut off: its first line names
#                  torch (the image's) and the carried libraries, then one line per figure (benchmarks/gpu/summary.py)
# Everything else (the step logs as they are written, the wheels' site folder, the models, the records, caches) is
# in a work folder outside $OUT (CHECK_WORK, default a new /tmp/gpu-check.*).
#
# Steps, each in its own process under its own time limit, cut to what the deadline leaves: setup (the carried
# wheels laid over the interpreter, the random-weight models made, the versions: benchmarks/gpu/setup.sh), window
# (the window probe), efficiency (Table 2's four sets, fp32 weights: harness beside the notebook-style loop), bf16
# (short fixed: autocast, bf16 weights, torch.compile), retrieval (SciFact, MiniLM's shape, bf16: harness beside
# sentence-transformers), encode (SciFact, ModernBERT-base's shape, bf16: harness beside sentence-transformers at its
# best batch, GPU busy from CUDA events, kernel time only), parity (per-text max |diff|, packed vs padded, fp32
# weights), gradients (a 2-layer model of ModernBERT-base's shape), task_efficiency and task_beir (the harness' own
# task=efficiency and task=beir records, each read by the step that wrote them).
#
# On the GPU machine: the image's python3 (torch 2.11 for CUDA 13, numpy, scipy, pandas, pyarrow, safetensors,
# huggingface-hub: see KINDS.md of the device tool); the rest comes from .whl/. PYTHON=<interpreter> overrides.
set -u
ROOT=$PWD; OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"; PY=${PYTHON:-python3}
DRY=0; [ "${1:-}" = "--cpu" ] && DRY=1
T0=$(date +%s)
FROM="CHECK_SECONDS"; [ -n "${CHECK_SECONDS:-}" ] || FROM="the default: CHECK_SECONDS unset"
DEADLINE=$((T0 + ${CHECK_SECONDS:-530}))
WORK=${CHECK_WORK:-$(mktemp -d /tmp/gpu-check.XXXXXX)}; LOGS=$WORK/logs; mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
: > "$OUT/figures.jsonl"; : > "$OUT/steps.jsonl"
pack() {   # logs.tar.gz, whole, replaced in one rename (a call cut off mid-write leaves the previous one)
  tar -czf "$OUT/logs.tar.gz.part" -C "$WORK" logs $([ -d "$WORK/records" ] && echo records) \
    && mv -f "$OUT/logs.tar.gz.part" "$OUT/logs.tar.gz"
}
finish() {
  "$PY" benchmarks/gpu/summary.py "$OUT" $([ $DRY = 1 ] && echo --dry-run) > "$OUT/summary.txt" 2>&1
  echo "total $(( $(date +%s) - T0 )) s (deadline $(( DEADLINE - T0 )) s from $FROM, + the summary)" >> "$OUT/summary.txt"
  pack; cat "$OUT/summary.txt"
}
trap finish EXIT
trap 'exit 143' TERM INT

step() {   # step <name> <time limit, s> <command...>: run under min(limit, what the deadline leaves), log, record
  local name=$1 limit=$2; shift 2
  local left=$(( DEADLINE - $(date +%s) )); local t=$(( limit < left ? limit : left ))
  if [ "$t" -lt 5 ]; then echo "== $name: not started, the check's deadline"; return 1; fi
  echo "== $name (time limit $t s)"; local s=$(date +%s)
  timeout -k 5 "$t" "$@" > "$LOGS/$name.log" 2>&1; local rc=$?
  "$PY" - "$OUT" "$LOGS" "$name" "$rc" "$(( $(date +%s) - s ))" "$t" <<'EOF'
import json, pathlib, sys
out, logs, name, rc, seconds, limit = sys.argv[1:]
log = [l for l in (pathlib.Path(logs) / f"{name}.log").read_text(errors="replace").splitlines() if l.strip()]
with open(pathlib.Path(out) / "steps.jsonl", "a") as fh:
    fh.write(json.dumps({"step": name, "rc": int(rc), "seconds": int(seconds), "limit": int(limit),
                         "last": log[-1][:300] if log else ""}) + "\n")
EOF
  pack
  echo "rc=$rc after $(( $(date +%s) - s )) s"; grep "^\[$name\]" "$LOGS/$name.log" | tail -12
  return $rc
}

B=benchmarks/gpu_unpadded.py
if [ $DRY = 1 ]; then
  DATA=${CHECK_DATA:-$ROOT/../shared/data/scifact}
  [ -f "$DATA/corpus.jsonl" ] || { echo "error: no BEIR folder at $DATA: set CHECK_DATA=<folder with corpus.jsonl>"; exit 2; }
  SITE=$WORK/site; MODELS=$WORK/models; SHAPE=tiny; WHL=${CHECK_WHEELS:-}; DEVICE=cpu
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  A="--device cpu --shrink 16 --out $OUT"; PREC=fp32; GRAD="--model-dir $MODELS/mb"
  EFF="--n-short 8 --n-long 2"; BF16="--n-short 8 --compile-backend eager"
  RET="--n-docs 16 --st-batch-sizes 32 --repeats 1"; PAR="--parity-docs 16"
  TASK_MODEL="model.path=$MODELS/mb model.max_length=512"; TASK_N=4
  BEIR="model=modernbert-base $TASK_MODEL task.max_docs=30 task.max_queries=10 task.data_dir=$(dirname "$DATA")"
else
  [ -d .whl ] && [ -d .gpu ] || { echo "error: .whl/ and .gpu/ are missing: run bash benchmarks/gpu/prepare.sh first"; exit 2; }
  DATA=$ROOT/.gpu/data/scifact
  SITE=/tmp/site; MODELS=/tmp/check-models; SHAPE=full; WHL=.whl; DEVICE=cuda
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$LOGS/gpu.txt" 2>&1
  cat "$LOGS/gpu.txt"
  A="--device cuda --out $OUT"; PREC=bf16; GRAD="--random base2"
  EFF="--n-short 512 --n-long 32 --tf32"; BF16="--n-short 1024"; RET="--repeats 2"; PAR="--parity-docs 64"
  TASK_MODEL="model.path=$MODELS/mb"; TASK_N=512
  BEIR="model=all-minilm-l6-v2 model.path=$MODELS/minilm model.attn_implementation=auto task.data_dir=$ROOT/.gpu/data"
fi
MB="--model-dir $MODELS/mb"; MINILM="--model-dir $MODELS/minilm"
at() { echo "paths.results=$WORK/records/$1 paths.outputs=$WORK/o/$1 paths.cache=$WORK/c/$1 hydra.run.dir=$WORK/h/$1"; }

step setup 120 bash benchmarks/gpu/setup.sh "$PY" "$SITE" "$MODELS" $SHAPE "$OUT" $DEVICE $WHL || exit 3
export PYTHONPATH=$SITE:$ROOT
step window 45 "$PY" $B window $A
step efficiency 150 "$PY" $B efficiency $A $MB $EFF
step bf16 110 "$PY" $B bf16 $A $MB $BF16
step retrieval 60 "$PY" $B retrieval $A $MINILM --data "$DATA" --precision $PREC $RET
step encode 100 "$PY" $B encode $A $MB --data "$DATA" --precision $PREC $RET
step parity 40 "$PY" $B parity $A $MB $PAR
step gradients 45 "$PY" $B gradients $A $GRAD
step task_efficiency 60 bash -c "$PY -m harness $(at eff) task=efficiency model=modernbert-base $TASK_MODEL \
  device=$DEVICE 'task.datasets=[short_fixed,short_variable]' task.n_docs=$TASK_N task.repeats=2 \
  task.max_batch.search=false; $PY benchmarks/gpu/records.py $WORK/records/eff $OUT $DEVICE task_efficiency"
step task_beir 60 bash -c "$PY -m harness $(at beir) task=beir $BEIR precision=$PREC device=$DEVICE task.train=false \
  'task.datasets=[scifact]'; $PY benchmarks/gpu/records.py $WORK/records/beir $OUT $DEVICE task_beir"
exit 0
