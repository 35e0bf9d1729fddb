#!/usr/bin/env bash
# The GPU check of the unpadded path (issue 39), about 6 minutes on one H100/H200. Prepared on a machine with the
# package registries by benchmarks/gpu/prepare.sh (.whl/, .gpu/ beside the checkout); run from the project root on
# the GPU machine: bash benchmarks/gpu/check.sh [efficiency] [retrieval] [gradients] [tasks] (default: all four; a
# later call on the same machine reuses the set-up, so the parts can run as separate commands). Expects python3 with
# torch+CUDA, numpy, scipy, scikit-learn, pandas, pyarrow, safetensors, huggingface-hub; the rest comes from .whl/.
# Results, logs and summary.txt (each of the issue's targets with its figure, PASS/FAIL) go to $OUT (./gpu-out).
set -u; ROOT=$PWD; OUT=${OUT:-$ROOT/gpu-out}; KEEP=/tmp/gpu-check; mkdir -p "$OUT" $KEEP   # KEEP: figures across calls
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
[ -d .whl ] && [ -d .gpu ] || { echo "error: .whl/ and .gpu/ are missing: run bash benchmarks/gpu/prepare.sh first"; exit 2; }
PARTS=${*:-efficiency retrieval gradients tasks}; t0=$(date +%s)
[ -d /tmp/site/transformers ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$ROOT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'transformers', transformers.__version__)" | tee -a "$OUT/gpu.txt"
[ -f /tmp/mb/model.safetensors ] && [ -f /tmp/minilm/model.safetensors ] || python3 benchmarks/gpu/make_models.py "$ROOT/.gpu" 2>&1 | tail -1
echo "setup $(( $(date +%s)-t0 )) s"
step() { local name=$1 T=$2; shift 2; local s=$(date +%s); echo "== $name"
  timeout "$T" "$@" >"$OUT/$name.log" 2>&1; echo "rc=$? $(( $(date +%s)-s )) s"; grep -v "^\s*$" "$OUT/$name.log" | tail -14; }
at() { echo "paths.results=/tmp/r/$1 paths.outputs=/tmp/o/$1 paths.cache=/tmp/c/$1 hydra.run.dir=/tmp/h/$1"; }
B=benchmarks/gpu_unpadded.py
for part in $PARTS; do case $part in
  # Table 2's sets, fp32 (the paper's protocol) and short fixed in bf16: the harness (auto: harness_varlen, packed)
  # against the notebook-style padded sdpa loop, with packed-vs-padded cosines per text (fp32 and bf16)
  efficiency) step efficiency 200 python3 $B efficiency --model-dir /tmp/mb --n-short 1024 --n-long 32 --repeats 2 \
    --json $KEEP/efficiency.json ;;
  # SciFact's corpus, MiniLM's shape, bf16: the harness encoder against sentence-transformers at its best batch size
  retrieval) step retrieval 150 python3 $B retrieval --data .gpu/data/scifact --model-dir /tmp/minilm --precision bf16 \
    --repeats 2 --batch-tokens 65536 --json $KEEP/retrieval.json ;;
  # gradients through the varlen kernel (DPR, ColBERT KD and GLUE training run this path) against padded sdpa
  gradients) step gradients 90 python3 $B gradients --model-dir /tmp/mb --json $KEEP/gradients.json ;;
  # the tasks themselves: efficiency records (attention, kernel, unpadded); SciFact nDCG@10 unpadded and padded
  tasks) step eff_task 120 python3 -m harness $(at eff) task=efficiency model=modernbert-base model.path=/tmp/mb \
      'task.datasets=[short_variable,long_variable]' task.n_docs=128 task.repeats=2 task.max_batch.search=false
    for attn in auto sdpa; do step "scifact_$attn" 100 python3 -m harness $(at "scifact_$attn") task=beir model=all-minilm-l6-v2 \
      model.path=/tmp/minilm model.attn_implementation=$attn precision=bf16 task.train=false 'task.datasets=[scifact]' \
      task.data_dir=$ROOT/.gpu/data; done
    tar czf "$OUT/records.tgz" -C /tmp r 2>/dev/null ;;
  *) echo "error: unknown part $part: use efficiency, retrieval, gradients or tasks"; exit 2 ;;
esac; done
cp $KEEP/*.json "$OUT/" 2>/dev/null; python3 benchmarks/gpu/summary.py $KEEP /tmp/r | tee "$OUT/summary.txt"
echo "total $(( $(date +%s)-t0 )) s"
