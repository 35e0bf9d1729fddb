#!/usr/bin/env bash
# The GPU check's set-up rehearsed for real on a CPU machine with the package registries, from the project root:
#
#   bash benchmarks/gpu/rehearse.sh        # everything under REHEARSAL_DIR (default /tmp/gpu-rehearsal), never in
#                                          # the checkout but .whl/ and .gpu/ (git-ignored), as the GPU call needs them
#
# 1. prepare:  benchmarks/gpu/prepare.sh builds .whl/ (for the GPU image's Python 3.12) and .gpu/, as for the GPU.
# 2. venv:     a fresh venv ($REHEARSAL_DIR/venv, interpreter REHEARSAL_PYTHON, default python3) holding only what the
#              GPU image holds that the check needs (benchmarks/gpu/image-packages.txt): torch at the image's 2.11
#              where the registry serves a CPU build of it, else the project's torch (said below); the image's
#              versions of the others where the registry serves them for this Python, else its newest (said).
# 3. wheels:   where the venv's Python is not 3.12, prepare.sh again for its Python into $REHEARSAL_DIR/whl (the
#              same pins; only compiled wheels differ), so .whl/ stays as the GPU needs it.
# 4. set-up:   benchmarks/gpu/setup.sh exactly as check.sh runs it on the GPU: the wheels laid over the venv
#              (pip --no-index --no-deps --target <site>, PYTHONPATH=<site>:<repo>), make_models.py at full shapes
#              (ModernBERT-base's, MiniLM's), the versions.
# 5. check:    check.sh --cpu on that Python, with the wheels (CHECK_WHEELS): every step and the summary.
# Then the time of each part and the files left in the check's $OUT (the GPU machine returns at most 8, none more
# than 2 folders down).
set -u
ROOT=$PWD; R=${REHEARSAL_DIR:-/tmp/gpu-rehearsal}; BASE=${REHEARSAL_PYTHON:-python3}
[ -f pyproject.toml ] || { echo "error: run this from the project root (bash benchmarks/gpu/rehearse.sh)"; exit 2; }
PREP=${PYTHON:-}; [ -n "$PREP" ] || { [ -x .venv/bin/python ] && PREP=.venv/bin/python || PREP=python3; }
rm -rf "$R"; mkdir -p "$R"; TIMES=()
part() {   # part <name> <command...>: run, time, stop the rehearsal where it fails
  local name=$1; shift; local t=$(date +%s)
  echo "== $name"
  "$@"; local rc=$?
  TIMES+=("$name: $(( $(date +%s) - t )) s, rc $rc")
  [ $rc = 0 ] || { echo "rehearsal stopped: $name exited $rc"; printf '%s\n' "${TIMES[@]}"; exit $rc; }
}

part prepare env PYTHON="$PREP" bash benchmarks/gpu/prepare.sh

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
  "$VPY" -m pip list --format=freeze 2>/dev/null | grep -iE '^(torch|numpy|scipy|pandas|pyarrow|safetensors|huggingface.hub)==' \
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
part "set-up as on the GPU (full shapes)" env -u PYTHONPATH bash benchmarks/gpu/setup.sh "$VPY" "$R/site" "$R/models" \
  full "$R/setup-out" cpu "$WHL"
part "check.sh --cpu" env -u PYTHONPATH CHECK_WHEELS="$WHL" PYTHON="$VPY" OUT="$R/out" CHECK_WORK="$R/work" \
  bash benchmarks/gpu/check.sh --cpu
echo "== the rehearsal"
printf '%s\n' "${TIMES[@]}"
echo "files in the check's \$OUT ($R/out), depth and size:"
(cd "$R/out" && find . -type f -printf '%d %s %p\n' | sort -k3)
echo "logs.tar.gz holds: $(tar -tzf "$R/out/logs.tar.gz" | grep -c '[^/]$') files: $(tar -tzf "$R/out/logs.tar.gz" | grep '^logs/[^/]*$' | tr '\n' ' ')"
head -1 "$R/out/summary.txt"; tail -2 "$R/out/summary.txt"
