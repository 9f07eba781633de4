#!/usr/bin/env bash
# The cuda backend's checks on a real NVIDIA GPU, in one call of at most ~8 minutes:
#   1. install what the machine lacks from the carried .whl/ folder (no internet there),
#   2. the cuda backend's tests (test_cuda.py: every IR op x dtype vs the cpu oracle) and the
#      shared differential test (test_differential.py: every suite kernel, cuda vs cpu),
#      bitwise/math/bf16 ops, padded loads, qnb.compare's probe build on cuda, plus the
#      NVRTC compile tests,
#   3. benchmarks/bench_cuda.py (f16 matmul vs cuBLAS and beside the warp-layout probes,
#      batched Cholesky vs cupy, launch overhead, a kernel without tiles in both layouts,
#      warm vs cold start), and benchmarks/bench_layouts.py --cuda (tiles of any shape:
#      matmul 512^3 with 16x16 vs 64x64 blocks and thread counts, row softmax 65536x128),
#   (the shape tests test_gpu_shapes.py and test_shapes_cpu.py run on cuda in step 2),
# then prints a short table. Full logs go to $OUT (or ./gpu_check_out) when set.
#
# Prepare on a machine with pip access, in the repo root (downloads ~5 MB):
#   bash scripts/gpu_check.sh --fetch-wheels
#   echo /.whl/ >> .git/info/exclude
# Then run it on the GPU machine with .whl carried:  bash scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."

WHEELS=(platformdirs ml_dtypes "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-crt==13.0.*")

if [[ "${1:-}" == "--fetch-wheels" ]]; then
    mkdir -p .whl
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform any -d .whl "${WHEELS[@]}"
    ls -la .whl
    exit 0
fi

PY=${PYTHON:-python3}
OUT_DIR=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT_DIR"
SITE=/tmp/qnb-site
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export QNB_CACHE_DIR=$(mktemp -d /tmp/qnb-cache-XXXX)
export XDG_RUNTIME_DIR=$(mktemp -d /tmp/qnb-xdg-XXXX)
chmod 700 "$XDG_RUNTIME_DIR"

step() { printf '\n=== %s\n' "$*"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader || true
$PY --version

step "install (carried wheels; headers only from the CUDA wheels)"
for wheel in platformdirs ml_dtypes; do
    if compgen -G ".whl/$wheel-*.whl" >/dev/null; then
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$SITE" .whl/$wheel-*.whl || echo "pip install of $wheel failed"
    fi
done
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"
# The image's CUDA toolkit (/usr/local/cuda/include) usually has the headers; if qnb finds
# none, unpack the carried header wheels (their libraries stay out of the way).
if ! $PY -c "from qnb.backends.cuda import include_dirs; include_dirs()" 2>/dev/null; then
    mkdir -p /tmp/qnb-headers
    for w in .whl/nvidia_cuda_runtime-*.whl .whl/nvidia_cuda_crt-*.whl; do
        [[ -f $w ]] && $PY -m zipfile -e "$w" /tmp/qnb-headers >/dev/null
    done
    export QNB_CUDA_INCLUDE=/tmp/qnb-headers/nvidia/cu13/include
fi
$PY - <<'EOF'
import cupy, qnb
from qnb.backends import cuda
print("cupy", cupy.__version__, "| nvrtc", cuda.nvrtc_version(), "| headers", cuda.include_dirs())
for b in qnb.backends():
    print(f"  {b.name:5s} available={b.available} device={b.device} reason={b.reason}")
EOF

step "tests: cuda vs cpu (test_cuda.py, test_differential.py, debug checks, kernel API) and NVRTC compiles"
# Only the tests that run something on cuda (the cpu-only ones ran in CI; minutes are scarce).
XDIST=""
$PY -c "import xdist" 2>/dev/null && XDIST="-n 8"
timeout 330 $PY -m pytest -q -p no:cacheprovider $XDIST -k "cuda and not cuda-host and not cuda_host" -o addopts="" \
    --timeout 120 -rfE \
    tests/backends/test_cuda.py tests/backends/test_differential.py \
    tests/backends/test_debug_checks.py tests/test_kernel_api.py tests/test_benchmark_kernels.py \
    tests/backends/test_memory_order.py tests/backends/test_float_specials.py \
    tests/backends/test_edge_cases.py tests/backends/test_cuda_compile.py \
    tests/backends/test_bitwise_math.py tests/backends/test_bf16.py \
    tests/backends/test_padded_loads.py tests/test_compare.py \
    tests/backends/test_gpu_shapes.py tests/backends/test_shapes_cpu.py 2>&1 | tee "$OUT_DIR/pytest.log" | tail -40
TEST_STATUS=${PIPESTATUS[0]}

step "benchmarks/bench_cuda.py"
timeout 200 $PY benchmarks/bench_cuda.py 2>&1 | tee "$OUT_DIR/bench.log"
BENCH_STATUS=${PIPESTATUS[0]}

step "benchmarks/bench_layouts.py (tiles of any shape; cuda beside wgpu where it runs)"
timeout 200 $PY benchmarks/bench_layouts.py --cuda --skip-old 2>&1 | tee "$OUT_DIR/bench_layouts.log"
LAYOUT_STATUS=${PIPESTATUS[0]}
BENCH_STATUS=$(( BENCH_STATUS != 0 || LAYOUT_STATUS != 0 ))

step "summary"
printf '  %-28s %s\n' "tests (exit $TEST_STATUS)" "$(grep -E '[0-9]+ (passed|failed)' "$OUT_DIR/pytest.log" | tail -1)"
printf '  %-28s %s\n' "bench (exit $BENCH_STATUS)" "$(grep -E 'ratio|speedup|as fast' "$OUT_DIR/bench.log" | tr -s ' ' | paste -sd ';' -)"
grep -E '^ +(qnb|cupy|probe|tile_matmul|batched_cholesky|add_one|thread per|block per)' "$OUT_DIR/bench.log" | sed 's/^/  /'
exit $(( TEST_STATUS != 0 || BENCH_STATUS != 0 ))
