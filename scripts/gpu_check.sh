#!/usr/bin/env bash
# The cuda backend's checks on a real NVIDIA GPU, in one call that ends within 9 minutes (a
# global deadline; each step has a budget, and the budgets add up to less):
#   1. install what the machine lacks from the carried .whl/ folder (no internet there),
#   2. the cuda backend's tests (test_cuda.py: every IR op x dtype vs the cpu oracle) and the
#      shared differential test (test_differential.py: every suite kernel, cuda vs cpu),
#      bitwise/math/bf16 ops, padded loads, qnb.compare's probe build on cuda, plus the
#      NVRTC compile tests,
#   3. benchmarks/bench_cuda.py (f16 matmul vs cuBLAS and beside the warp-layout probes,
#      bf16 matmul vs cuBLAS, batched Cholesky vs cupy, a wide row softmax and a causal
#      attention vs CuPy in place, launch overhead, a kernel without tiles in both layouts,
#      warm vs cold start), and benchmarks/bench_layouts.py --cuda (tiles of any shape:
#      matmul 512^3 with 16x16 vs 64x64 blocks and thread counts, row softmax 65536x128),
#   (the shape tests test_gpu_shapes.py and test_shapes_cpu.py run on cuda in step 2),
# then prints a short table. Full logs go to $OUT (or ./gpu_check_out) as each step runs, so
# they come back even when a step dies. The first step that fails ends the run (the table
# still prints). QNB_REQUIRE_CUDA=1: a cuda test or benchmark that cannot run fails, never
# skips, so the check cannot pass while testing nothing. Nothing here needs wgpu.
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
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 QNB_REQUIRE_CUDA=1
export QNB_CACHE_DIR=$(mktemp -d /tmp/qnb-cache-XXXX)
export XDG_RUNTIME_DIR=$(mktemp -d /tmp/qnb-xdg-XXXX)
chmod 700 "$XDG_RUNTIME_DIR"

# The deadline and the steps' budgets (seconds): 30 + 60 + 240 + 150 + 45 = 525 < 540.
TOTAL=${GPU_CHECK_SECONDS:-540}
START=$(date +%s)
DEADLINE=$(( START + TOTAL ))
declare -A BUDGET=([machine]=30 [install]=60 [tests]=240 [bench]=150 [layouts]=45)
declare -A STATUS=()
FAILED=""

step() { printf '\n=== %s\n' "$*"; }
# run NAME LOG COMMAND...: under the smaller of its budget and what the deadline leaves
# (15 s kept for the table); skipped once a step has failed or no time is left.
run() {
    local name=$1 log=$2; shift 2
    local left=$(( DEADLINE - $(date +%s) - 15 ))
    local limit=$(( BUDGET[$name] < left ? BUDGET[$name] : left ))
    if [[ -n $FAILED ]]; then STATUS[$name]="skipped (after $FAILED failed)"; return; fi
    if (( limit <= 0 )); then STATUS[$name]="skipped (deadline)"; FAILED=$name; return; fi
    step "$name (limit ${limit}s)"
    timeout "$limit" "$@" 2>&1 | tee "$OUT_DIR/$log"
    local code=${PIPESTATUS[0]}
    if (( code == 124 )); then STATUS[$name]="timed out after ${limit}s"; FAILED=$name
    elif (( code != 0 )); then STATUS[$name]="failed (exit $code)"; FAILED=$name
    else STATUS[$name]="ok"; fi
}

machine() {
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
    $PY --version
}

install() {
    for wheel in platformdirs ml_dtypes; do
        if compgen -G ".whl/$wheel-*.whl" >/dev/null; then
            $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
                --target "$SITE" .whl/$wheel-*.whl || return 1
        fi
    done
    # The image's CUDA toolkit usually has the headers; else the carried header wheels.
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
    print(f"  {b.name:9s} available={b.available} device={b.device} reason={b.reason}")
info = {b.name: b for b in qnb.backends()}["cuda"]
raise SystemExit(0 if info.available else f"the cuda backend is unavailable: {info.reason}")
EOF
}
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"

tests() {
    local xdist=""
    $PY -c "import xdist" 2>/dev/null && xdist="-n 8"
    # Every test of these files that runs on cuda (the cpu-only ones ran in CI), the bf16
    # bit-exact ones among them; QNB_REQUIRE_CUDA=1 fails a cuda test that would skip.
    $PY -m pytest -q -p no:cacheprovider $xdist -o addopts="" --timeout 120 -rfE \
        --junitxml="$OUT_DIR/pytest.xml" \
        -k "cuda and not cuda-host and not cuda_host" \
        tests/backends/test_cuda.py tests/backends/test_differential.py \
        tests/backends/test_debug_checks.py tests/test_kernel_api.py tests/test_benchmark_kernels.py \
        tests/backends/test_memory_order.py tests/backends/test_float_specials.py \
        tests/backends/test_edge_cases.py tests/backends/test_cuda_compile.py \
        tests/backends/test_bitwise_math.py tests/backends/test_bf16.py \
        tests/backends/test_padded_loads.py tests/test_compare.py tests/backends/test_wide_rows.py \
        tests/backends/test_gpu_shapes.py tests/backends/test_shapes_cpu.py \
        tests/backends/test_atomics.py tests/backends/test_scans.py tests/backends/test_scans_more.py \
        tests/backends/test_argmax_and_argmin.py tests/backends/test_prod_and_mean.py \
        tests/backends/test_vec_constructor_and_cdiv.py tests/backends/test_cuda_errors.py \
        tests/backends/test_cuda_shared_memory.py tests/backends/test_host_arrays.py \
        tests/backends/test_launch_threads.py tests/backends/test_tensor_core_warps.py
}

# (install runs in this shell, not under `run`'s timeout, so its QNB_CUDA_INCLUDE stays)
run machine machine.log machine
[[ -n $FAILED ]] && FAILED="" && STATUS[machine]="no nvidia-smi (going on)"
step "install"
install 2>&1 | tee "$OUT_DIR/install.log"
if (( PIPESTATUS[0] != 0 )); then STATUS[install]="failed"; FAILED=install; else STATUS[install]="ok"; fi
[[ -d /tmp/qnb-headers/nvidia/cu13/include ]] && export QNB_CUDA_INCLUDE=/tmp/qnb-headers/nvidia/cu13/include
run tests pytest.log tests
run bench bench.log $PY benchmarks/bench_cuda.py
run layouts bench_layouts.log $PY benchmarks/bench_layouts.py --cuda --sections 12

step "summary"
{
    for name in machine install tests bench layouts; do
        printf '  %-8s %s\n' "$name" "${STATUS[$name]:-not run}"
    done
    [[ -f $OUT_DIR/pytest.log ]] && printf '  %-8s %s\n' pytest "$(grep -E '[0-9]+ (passed|failed|error)' "$OUT_DIR/pytest.log" | tail -1)"
    # the bit-exact half-precision checks against cpu, by outcome (from pytest's junit xml)
    [[ -f $OUT_DIR/pytest.xml ]] && $PY scripts/gpu_check_halves.py "$OUT_DIR/pytest.xml"
    if [[ -f $OUT_DIR/bench.log ]]; then
        grep -E 'ratio|speedup|as fast' "$OUT_DIR/bench.log" | sed 's/^/  /'
        grep -E '^ +(qnb|cupy|probe|tile_matmul|batched_cholesky|add_one|wide_softmax|causal_attention|thread per|block per)' "$OUT_DIR/bench.log" | sed 's/^/  /'
    fi
    printf '  wall %ss of %ss\n' "$(( $(date +%s) - START ))" "$TOTAL"
} | tee "$OUT_DIR/summary.txt"
[[ -z $FAILED ]]
