#!/usr/bin/env bash
# The GPU check of the unpadded path (issues 39, 46, 54 and 62): ONE call with a deadline. Prepared on a machine
# with the package registries by benchmarks/gpu/prepare.sh (.whl/ and .gpu/ beside the checkout, carried to the GPU
# machine; .gpu/MANIFEST verified here before the set-up); rehearsed end to end on a CPU by
# benchmarks/gpu/rehearse.sh. Run from the repository root:
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
#   steps.jsonl    one line per step: exit code, seconds, time limit, what cut it (its own limit or the check's
#                  deadline), the last line of its log; a step not started gets a line saying why
#   logs.tar.gz    every step's log, gpu.txt (nvidia-smi) and the harness' task records, rewritten after each step
#                  (read it with: tar -xzf logs.tar.gz && less logs/efficiency.log; records/ holds the records)
#   summary.txt    written by the exit trap, also when a step or the whole call is cut off: its first line names
#                  torch (the image's) and the carried libraries, then one line per figure, a MISSING line for each
#                  figure with a target that was not written, and why (benchmarks/gpu/summary.py)
# Everything else (the step logs as they are written, the wheels' site folder, the models, the records, caches) is
# in a work folder outside $OUT (CHECK_WORK, default a new /tmp/gpu-check.*).
#
# Steps, each in its own process under its own time limit, cut to what the deadline leaves. Every figure with a
# target is written before anything without one: setup (the carried wheels laid over the interpreter, the
# random-weight models made, the versions: benchmarks/gpu/setup.sh), window (the window probe), efficiency
# (Table 2's four sets with fp32 weights through the harness, each length's variable / fixed right after its
# variable set), bf16 (short fixed, bf16 weights), encode (SciFact, ModernBERT-base's shape, bf16: harness beside
# sentence-transformers at its best batch with tokenizer parallelism on, GPU busy from kernel time only), parity
# (per-text max |diff|, packed vs padded, fp32 weights), gradients (a 2-layer model of ModernBERT-base's shape),
# task_efficiency and task_beir (the harness' own records, each read by the step that wrote them); then
# information, the information only, in one process, its parts in this order: padded (the notebook-style padded loop
# beside the harness rates: unpadding plus precision; TF32 on), autocast (short fixed, autocast over fp32 weights),
# retrieval (SciFact, MiniLM's shape) and, last, compile (the cold torch.compile of short fixed in bf16 weights).
#
# On the GPU machine: the image's python3 (torch 2.11 for CUDA 13, numpy, scipy, pandas, pyarrow, safetensors,
# huggingface-hub, peft...: see KINDS.md of the device tool); the rest comes from .whl/. PYTHON=<interpreter>
# overrides.
set -u
ROOT=$PWD; OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"; PY=${PYTHON:-python3}
DRY=0; [ "${1:-}" = "--cpu" ] && DRY=1
T0=$(date +%s)
# Each step's time limit on the GPU machine, s. setup: benchmarks/gpu/rehearse.sh times the set-up at full shapes on
# its CPU and states this limit's margin over it (docs/efficiency.md: 180 s, 2.2x the 83 s it took on a busy 2-core
# CPU; the GPU machine has 16 cores). The target steps' limits add up past the deadline: the deadline decides.
declare -A LIMIT=([setup]=180 [window]=45 [efficiency]=90 [bf16]=45 [encode]=120 [parity]=40 [gradients]=45
  [task_efficiency]=60 [task_beir]=60 [information]=300)
# The CPU dry run scales every limit (and the default deadline) to the CPU it runs on: the GPU machine's 16 cores
# over this CPU's, times this CPU's load per core, each at least 1 (CHECK_SCALE=<n> sets it).
SCALE=1; SCALED=""
if [ $DRY = 1 ]; then
  SCALE=${CHECK_SCALE:-$(awk -v n="$(nproc)" '{ c = 16 / n; if (c < 1) c = 1; l = $1 / n; if (l < 1) l = 1;
    f = c * l; printf "%d", (f == int(f)) ? f : int(f) + 1 }' /proc/loadavg)}
  SCALED="; limits x$SCALE for this CPU: $(nproc) cores (the GPU machine's 16), load $(cut -d' ' -f1 /proc/loadavg)"
fi
FROM="CHECK_SECONDS"; [ -n "${CHECK_SECONDS:-}" ] || FROM="the default: CHECK_SECONDS unset"
DEADLINE=$((T0 + ${CHECK_SECONDS:-$((530 * SCALE))}))
WORK=${CHECK_WORK:-$(mktemp -d /tmp/gpu-check.XXXXXX)}; LOGS=$WORK/logs; mkdir -p "$LOGS"
# the harness' own setting (as scripts/test.sh sets it too); the sentence-transformers side turns tokenizer
# parallelism on for its own runs, as its users run it (benchmarks/gpu/retrieval.py)
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
: > "$OUT/figures.jsonl"; : > "$OUT/steps.jsonl"
pack() {   # logs.tar.gz, whole, replaced in one rename (a call cut off mid-write leaves the previous one)
  tar -czf "$OUT/logs.tar.gz.part" -C "$WORK" logs $([ -d "$WORK/records" ] && echo records) \
    && mv -f "$OUT/logs.tar.gz.part" "$OUT/logs.tar.gz"
}
finish() {
  "$PY" benchmarks/gpu/summary.py "$OUT" $([ $DRY = 1 ] && echo --dry-run) > "$OUT/summary.txt" 2>&1
  echo "total $(( $(date +%s) - T0 )) s (deadline $(( DEADLINE - T0 )) s from $FROM, + the summary$SCALED)" >> "$OUT/summary.txt"
  pack; cat "$OUT/summary.txt"
}
trap finish EXIT
trap 'exit 143' TERM INT
record() {   # record key=value...: one line of steps.jsonl (numbers as numbers)
  "$PY" - "$OUT/steps.jsonl" "$@" <<'EOF'
import json, sys
line = {}
for pair in sys.argv[2:]:
    key, value = pair.split("=", 1)
    line[key] = int(value) if value.lstrip("-").isdigit() else value
with open(sys.argv[1], "a") as fh:
    fh.write(json.dumps(line) + "\n")
EOF
}
last_line() { grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -1 | cut -c1-300; }

BLOCKED=""   # why no later step starts (the set-up did not finish)
step() {   # step <name> <command...>: run under min(its limit, what the deadline leaves), log, record
  local name=$1; shift
  local own=$(( LIMIT[$name] * SCALE )); local left=$(( DEADLINE - $(date +%s) )); local t=$(( own < left ? own : left ))
  if [ -n "$BLOCKED" ]; then
    record step=$name started=no "why=$BLOCKED"; echo "== $name: not started, $BLOCKED"; return 1
  fi
  if [ "$t" -lt 5 ]; then
    record step=$name started=no "why=the check's deadline ($left s left)"
    echo "== $name: not started, the check's deadline"; return 1
  fi
  echo "== $name (time limit $t s)"; local s=$(date +%s)
  timeout -k 5 "$t" "$@" > "$LOGS/$name.log" 2>&1; local rc=$?
  local cut=""; [ $rc = 124 ] || [ $rc = 137 ] && { [ "$t" -lt "$own" ] && cut="the check's deadline" || cut="its own limit"; }
  record step=$name rc=$rc seconds=$(( $(date +%s) - s )) limit=$t own_limit=$own "cut=$cut" "last=$(last_line "$LOGS/$name.log")"
  pack
  echo "rc=$rc after $(( $(date +%s) - s )) s${cut:+ (cut by $cut)}"; grep "^\[$name\]" "$LOGS/$name.log" | tail -12
  return $rc
}

B=benchmarks/gpu_unpadded.py
if [ $DRY = 1 ]; then
  DATA=${CHECK_DATA:-$ROOT/../shared/data/scifact}
  [ -f "$DATA/corpus.jsonl" ] || { echo "error: no BEIR folder at $DATA: set CHECK_DATA=<folder with corpus.jsonl>"; exit 2; }
  SITE=$WORK/site; MODELS=$WORK/models; SHAPE=tiny; WHL=${CHECK_WHEELS:-}; DEVICE=cpu
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  A="--device cpu --shrink 16 --out $OUT"; PREC=fp32; GRAD="--model-dir $MODELS/mb"
  EFF="--n-short 8 --n-long 2"; BF16="--n-bf16 8"; TF32=""; COMPILE="--compile-backend eager"
  RET="--n-docs 16 --st-batch-sizes 32 --repeats 1"; PAR="--parity-docs 16"
  TASK_MODEL="model.path=$MODELS/mb model.max_length=512"; TASK_N=4
  BEIR="model=modernbert-base $TASK_MODEL task.max_docs=30 task.max_queries=10 task.data_dir=$(dirname "$DATA")"
else
  # the preparation, whole, before anything starts: .gpu/MANIFEST lists every file prepare.sh made, with its size
  if ! refusal=$("$PY" benchmarks/gpu/manifest.py verify .gpu/MANIFEST 2>&1); then
    refusal=${refusal##*$'\n'}; echo "$refusal"
    echo "$refusal" > "$LOGS/setup.log"; record step=setup started=no "why=refused: $refusal"; exit 2
  fi
  DATA=$ROOT/.gpu/data/scifact
  SITE=/tmp/site; MODELS=/tmp/check-models; SHAPE=full; WHL=.whl; DEVICE=cuda
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$LOGS/gpu.txt" 2>&1
  cat "$LOGS/gpu.txt"
  A="--device cuda --out $OUT"; PREC=bf16; GRAD="--random base2"
  EFF="--n-short 512 --n-long 32"; BF16="--n-bf16 1024"; TF32="--tf32"; COMPILE=""
  RET="--repeats 2"; PAR="--parity-docs 64"
  TASK_MODEL="model.path=$MODELS/mb"; TASK_N=512
  BEIR="model=all-minilm-l6-v2 model.path=$MODELS/minilm model.attn_implementation=auto task.data_dir=$ROOT/.gpu/data"
fi
MB="--model-dir $MODELS/mb"
at() { echo "paths.results=$WORK/records/$1 paths.outputs=$WORK/o/$1 paths.cache=$WORK/c/$1 hydra.run.dir=$WORK/h/$1"; }

EXIT=0
step setup bash benchmarks/gpu/setup.sh "$PY" "$SITE" "$MODELS" $SHAPE "$OUT" $DEVICE $WHL \
  || { BLOCKED="the set-up did not finish"; EXIT=3; }
export PYTHONPATH=$SITE:$ROOT
# the figures with a target (and what comes with them at no extra time)
step window "$PY" $B window $A
step efficiency "$PY" $B efficiency $A $MB $EFF
step bf16 "$PY" $B bf16 $A $MB $BF16
step encode "$PY" $B encode $A $MB --data "$DATA" --precision $PREC $RET
step parity "$PY" $B parity $A $MB $PAR
step gradients "$PY" $B gradients $A $GRAD
step task_efficiency bash -c "$PY -m harness $(at eff) task=efficiency model=modernbert-base $TASK_MODEL \
  device=$DEVICE 'task.datasets=[short_fixed,short_variable]' task.n_docs=$TASK_N task.repeats=2 \
  task.max_batch.search=false; $PY benchmarks/gpu/records.py $WORK/records/eff $OUT $DEVICE task_efficiency"
step task_beir bash -c "$PY -m harness $(at beir) task=beir $BEIR precision=$PREC device=$DEVICE task.train=false \
  'task.datasets=[scifact]'; $PY benchmarks/gpu/records.py $WORK/records/beir $OUT $DEVICE task_beir"
# information only, after every figure with a target: padded, autocast, retrieval, then the cold torch.compile
step information "$PY" $B information $A $MB $EFF $BF16 $TF32 --minilm-dir $MODELS/minilm --data "$DATA" \
  --precision $PREC $RET $COMPILE
exit $EXIT
