#!/usr/bin/env bash
# The GPU check of the unpadded path (issue 39), about 6 minutes on one H100/H200. Prepared on a machine with the
# package registries by benchmarks/gpu/prepare.sh (.whl/, .gpu/ beside the checkout); run from the project root on
# the GPU machine: bash benchmarks/gpu/check.sh. Expects python3 with torch+CUDA, numpy, scipy, scikit-learn, pandas,
# pyarrow, safetensors, huggingface-hub; everything else comes from .whl/. Results, logs and a summary of the issue's
# "done when" figures go to $OUT (default ./gpu-out).
set -u; ROOT=$PWD; OUT=${OUT:-$ROOT/gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
[ -d .whl ] && [ -d .gpu ] || { echo "error: .whl/ and .gpu/ are missing: run bash benchmarks/gpu/prepare.sh first"; exit 2; }
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$ROOT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'transformers', transformers.__version__)" | tee -a "$OUT/gpu.txt"
python3 benchmarks/gpu/make_models.py "$ROOT/.gpu" 2>&1 | tail -1; echo "setup $(( $(date +%s)-t0 )) s"
step() { local name=$1 T=$2; shift 2; local s=$(date +%s); echo "== $name"
  timeout "$T" "$@" >"$OUT/$name.log" 2>&1; echo "rc=$? $(( $(date +%s)-s )) s"; grep -v "^\s*$" "$OUT/$name.log" | tail -14; }
harness() { local name=$1; shift; python3 -m harness "$@" paths.results=/tmp/r/$name paths.outputs=/tmp/o/$name \
  paths.cache=/tmp/c/$name hydra.run.dir=/tmp/h/$name; }
B=benchmarks/gpu_unpadded.py
# 1. Table 2's sets, fp32 (the paper's protocol) and bf16 short fixed: the harness (auto: harness_varlen, packed)
#    against the notebook-style padded sdpa loop, with packed-vs-padded parity (cosine per text, fp32 and bf16)
step efficiency 200 python3 $B efficiency --model-dir /tmp/mb --n-short 1024 --n-long 32 --repeats 3 --json "$OUT/efficiency.json"
# 2. SciFact's corpus, MiniLM's shape, bf16: the harness encoder against sentence-transformers at its best batch size
step retrieval 150 python3 $B retrieval --data .gpu/data/scifact --model-dir /tmp/minilm --precision bf16 --repeats 2 --json "$OUT/retrieval.json"
# 3. gradients through the varlen kernel (training: DPR, ColBERT KD, GLUE run this path) against padded sdpa
step gradients 90 python3 $B gradients --model-dir /tmp/mb --json "$OUT/gradients.json"
# 4. the task itself: records say which attention, which kernel, unpadded
step eff_task 120 harness eff task=efficiency model=modernbert-base model.path=/tmp/mb 'task.datasets=[short_variable,long_variable]' \
  task.n_docs=256 task.repeats=2 task.max_batch.search=false
# 5. SciFact nDCG@10 through the whole task, unpadded (auto) and padded (sdpa), bf16
for attn in auto sdpa; do step "scifact_$attn" 100 harness "scifact_$attn" task=beir model=all-minilm-l6-v2 model.path=/tmp/minilm \
  model.attn_implementation=$attn precision=bf16 task.train=false 'task.datasets=[scifact]' task.data_dir=$ROOT/.gpu/data; done
tar czf "$OUT/records.tgz" -C /tmp r 2>/dev/null
python3 benchmarks/gpu/summary.py "$OUT" /tmp/r | tee "$OUT/summary.txt"
echo "total $(( $(date +%s)-t0 )) s"
