#!/usr/bin/env bash
# The GPU check, in one run on a machine with an NVIDIA GPU (the project's GPU issue; never part of CI).
#
#   OUT=/some/folder bash tools/gpu_check.sh      # every log and table lands in $OUT
#
# Runs from the working tree (PYTHONPATH=., no install step) with the machine's python3, which must
# have numpy and CuPy (pytest, networkx, onnx, onnxruntime, numba, torch used where present). Each
# phase has its own time limit so a hang in one still leaves the others' results; the whole script
# stays under about 9 minutes. Phases:
#   1. versions: GPU, driver, CUDA runtime, CuPy, NumPy, torch       -> $OUT/versions.txt
#   2. the GPU-only tests (no device switch)                         -> $OUT/gpu_tests.txt
#   3. the device suites with LAZYARRAY_TEST_DEVICE=gpu              -> $OUT/device_suites.txt, .xml
#   4. benchmarks/gpu.py                                             -> $OUT/gpu_benchmark.txt
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
export PYTHONPATH=.
PY=${PYTHON:-python3}
PYTEST=("$PY" -m pytest -p no:cacheprovider -o addopts= -q -W ignore -m "not slow")

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  $PY - <<'PYEOF'
import numpy, sys
print("python", sys.version.split()[0], "numpy", numpy.__version__)
try:
    import cupy
    rt = cupy.cuda.runtime
    print("cupy", cupy.__version__, "CUDA runtime", rt.runtimeGetVersion(), "driver", rt.driverGetVersion(),
          "devices", rt.getDeviceCount())
except Exception as exc:
    print("cupy unusable:", type(exc).__name__, exc)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
except Exception as exc:
    print("torch unusable:", type(exc).__name__, exc)
import lazyarray as la
print("lazyarray gpu_available", la.gpu_available())
PYEOF
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"

echo "== phase 2: GPU-only tests"
timeout 120 "${PYTEST[@]}" tests/test_device_gpu.py tests/test_device.py tests/executor/test_fusion_gpu.py \
  tests/executor/test_plan.py -rs > "$OUT/gpu_tests.txt" 2>&1
echo "rc=$?" >> "$OUT/gpu_tests.txt"; tail -5 "$OUT/gpu_tests.txt"

echo "== phase 3: device suites on gpu(0)"
LAZYARRAY_TEST_DEVICE=gpu timeout 300 "${PYTEST[@]}" tests --maxfail=300 -rfE \
  --junitxml="$OUT/device_suites.xml" > "$OUT/device_suites.txt" 2>&1
echo "rc=$?" >> "$OUT/device_suites.txt"; tail -5 "$OUT/device_suites.txt"

echo "== phase 4: benchmarks/gpu.py"
timeout 180 $PY benchmarks/gpu.py > "$OUT/gpu_benchmark.txt" 2>&1
echo "rc=$?" >> "$OUT/gpu_benchmark.txt"; cat "$OUT/gpu_benchmark.txt"
