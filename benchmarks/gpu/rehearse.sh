#!/usr/bin/env bash
# The GPU check's set-up rehearsed for real on a CPU machine with the package registries, from the project root:
#
#   bash benchmarks/gpu/rehearse.sh        # everything under REHEARSAL_DIR (default /tmp/gpu-rehearsal), never in
#                                          # the checkout but .whl/ and .gpu/ (git-ignored), as the GPU call needs them
#
# 1. prepare:  benchmarks/gpu/prepare.sh builds .whl/ (for the GPU image's Python 3.12) and .gpu/, as for the GPU;
#              then .gpu/MANIFEST verified as check.sh verifies it on the GPU before its set-up.
# 2. venv:     a fresh venv ($REHEARSAL_DIR/venv, interpreter REHEARSAL_PYTHON, default python3) holding only what the
#              GPU image holds that the check needs or imports on its path (benchmarks/gpu/image-packages.txt): torch
#              at the image's 2.11 where the registry serves a CPU build of it, else the project's torch (said
#              below); the image's versions of the others where the registry serves them for this Python, else its
#              newest (said); a package whose build must match torch's (torchvision) kept only where it imports.
# 3. wheels:   where the venv's Python is not 3.12, prepare.sh again for its Python into $REHEARSAL_DIR/whl (the
#              same pins; only compiled wheels differ), so .whl/ stays as the GPU needs it.
# 4. set-up:   benchmarks/gpu/setup.sh exactly as check.sh runs it on the GPU: the wheels laid over the venv
#              (pip --no-index --no-deps --target <site>, PYTHONPATH=<site>:<repo>), make_models.py at full shapes
#              (ModernBERT-base's, MiniLM's), the versions; its time against check.sh's set-up limit (the margin,
#              said: this CPU is slower than the GPU machine's 16 cores, so the margin there is larger).
# 5. check:    check.sh --cpu on that Python, with the wheels (CHECK_WHEELS): every step and the summary, its limits
#              scaled to this CPU (check.sh: its cores and load against the GPU machine's 16 cores).
# Then the time of each part, the load before and after, and the files left in the check's $OUT (the GPU machine
# returns at most 8, none more than 2 folders down).
set -u
ROOT=$PWD; R=${REHEARSAL_DIR:-/tmp/gpu-rehearsal}; BASE=${REHEARSAL_PYTHON:-python3}
[ -f pyproject.toml ] || { echo "error: run this from the project root (bash benchmarks/gpu/rehearse.sh)"; exit 2; }
PREP=${PYTHON:-}; [ -n "$PREP" ] || { [ -x .venv/bin/python ] && PREP=.venv/bin/python || PREP=python3; }
rm -rf "$R"; mkdir -p "$R"; TIMES=(); LOAD0=$(uptime)
part() {   # part <name> <command...>: run, time, stop the rehearsal where it fails
  local name=$1; shift; local t=$(date +%s)
  echo "== $name"
  "$@"; local rc=$?
  TIMES+=("$name: $(( $(date +%s) - t )) s, rc $rc")
  [ $rc = 0 ] || { echo "rehearsal stopped: $name exited $rc"; printf '%s\n' "${TIMES[@]}"; exit $rc; }
}

part prepare env PYTHON="$PREP" bash benchmarks/gpu/prepare.sh
part "manifest verified" "$PREP" benchmarks/gpu/manifest.py verify .gpu/MANIFEST

venv() {
  "$BASE" -m venv "$R/venv" || return 1
  local VPY=$R/venv/bin/python torch_pin
  "$VPY" -m pip install -q --upgrade pip >/dev/null 2>&1
  echo "venv: $("$VPY" --version) at $R/venv"
  if "$VPY" -m pip install -q --dry-run --no-deps --ignore-installed --report "$R/torch.json" torch==2.11.0 >/dev/null 2>&1 \
     && ! grep -q '"nvidia-' "$R/torch.json"; then
    torch_pin="torch==2.11.0"; echo "torch: the image's 2.11.0, a CPU build served by the registry"
  else
    torch_pin=$(grep -i '^torch==' constraints.txt)
    echo "torch: the registry serves 2.11.0 only as a CUDA build (it requires nvidia-* packages), no CPU build: the" \
         "project's $torch_pin instead (constraints.txt; a local CPU wheel where pip finds one)"
  fi
  local wanted=("$torch_pin") line name
  while read -r line; do
    line=${line%%#*}; line=${line// /}; [ -n "$line" ] || continue
    name=${line%%==*}; [ "$name" = torch ] && continue
    if [ "$line" != "$name" ] && ! "$VPY" -m pip install -q --dry-run --no-deps --ignore-installed "$line" >/dev/null 2>&1; then
      echo "$name: the image's ${line#*==} is not served for this Python: the registry's newest instead"; line=$name
    fi
    wanted+=("$line")
  done < benchmarks/gpu/image-packages.txt
  echo "installing: ${wanted[*]}"
  "$VPY" -m pip install -q "${wanted[@]}" || return 1
  local why   # a build that must match torch's (the registry serves torchvision as CUDA's): kept only where it imports
  if "$VPY" -m pip show -q torchvision >/dev/null 2>&1 && ! why=$("$VPY" -c "import torchvision" 2>&1); then
    "$VPY" -m pip uninstall -q -y torchvision >/dev/null 2>&1
    echo "torchvision: the registry's build does not import against this venv's torch (${why##*$'\n'}): left out" \
         "here, as torch 2.11 is (on the GPU the image's torchvision matches its torch)"
  fi
  "$VPY" -m pip list --format=freeze 2>/dev/null | grep -iE '^(torch|torchvision|numpy|scipy|pandas|pyarrow|safetensors|huggingface.hub|peft|sentencepiece|accelerate|transformers)==' \
    | tr '\n' ' '; echo
}
part venv venv
VPY=$R/venv/bin/python
VER=$("$VPY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
WHL=.whl
if [ "$VER" != 3.12 ]; then
  WHL=$R/whl
  part "wheels for Python $VER" env PYTHON="$PREP" PYVER="$VER" WHL="$WHL" GPU_DIR="$R/gpu" bash benchmarks/gpu/prepare.sh
fi
S0=$(date +%s)
part "set-up as on the GPU (full shapes)" env -u PYTHONPATH bash benchmarks/gpu/setup.sh "$VPY" "$R/site" "$R/models" \
  full "$R/setup-out" cpu "$WHL"
SETUP_S=$(( $(date +%s) - S0 )); LIMIT=$(grep -o '\[setup\]=[0-9]*' benchmarks/gpu/check.sh | cut -d= -f2)
MARGIN="check.sh's set-up limit on the GPU, $LIMIT s, is $(awk -v l="$LIMIT" -v t="$SETUP_S" 'BEGIN { printf "%.1f", l / (t > 0 ? t : 1) }')x this set-up's $SETUP_S s at full shapes on this CPU ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg); the GPU machine: 16 cores)"
echo "$MARGIN"; [ "$SETUP_S" -lt "$LIMIT" ] || echo "WARNING: the set-up took longer here than check.sh allows it on the GPU"
part "check.sh --cpu" env -u PYTHONPATH CHECK_WHEELS="$WHL" PYTHON="$VPY" OUT="$R/out" CHECK_WORK="$R/work" \
  bash benchmarks/gpu/check.sh --cpu
echo "== the rehearsal"
printf '%s\n' "${TIMES[@]}"
echo "$MARGIN"
echo "load before: $LOAD0"; echo "load after:  $(uptime)"
echo "files in the check's \$OUT ($R/out), depth and size:"
(cd "$R/out" && find . -type f -printf '%d %s %p\n' | sort -k3)
echo "logs.tar.gz holds: $(tar -tzf "$R/out/logs.tar.gz" | grep -c '[^/]$') files: $(tar -tzf "$R/out/logs.tar.gz" | grep '^logs/[^/]*$' | tr '\n' ' ')"
head -1 "$R/out/summary.txt"; tail -2 "$R/out/summary.txt"
