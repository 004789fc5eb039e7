#!/usr/bin/env bash
# Speed of mcgs_jax against mctx on a lent GPU, in one call of at most nine minutes:
# mcgs_jax.apps.benchmark (throughput and S-scaling), benchmarks/parallel.py
# (num_parallel), benchmarks/profile_ply.py (the default agent's ply part by part:
# reroot, search with and without the solver, tree mode, evaluations, mctx) and
# benchmarks/selfplay_time.py (a default self-play iteration beside mctx's).
#
# Here (once, in the repository root), fetch the pure-Python wheels the GPU image
# lacks:   bash benchmarks/gpu.sh fetch
# There (one device call, carrying .whl):
#          bash benchmarks/gpu.sh run
# Writes the markdown table to $OUT/bench_gpu.md (or stdout) for benchmarks/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-run}" in
  fetch)
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    mkdir -p .whl
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp -d .whl mctx==0.0.71 pgx==2.6.0 svgwrite
    ;;
  run)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
    out="${OUT:-.}"
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
    # B in {1, 1024, 8192} x S in {64, 256}; per-simulation scaling at B=256; capacity
    # alone at B=1024, S=64, new and recycled tables. Each part prints a JSON line per measurement as it goes,
    # so a part cut by its timeout still leaves its finished rows.
    timeout 250 python3 -m mcgs_jax.apps.benchmark --batch-sizes 1,1024,8192 --simulations 64,256 \
      --scaling-batch-size 256 --scaling-simulations 64,1024 --capacities 65,1025,4097 \
      --capacity-batch-size 1024 --repeats 3 \
      --json "$out/bench_gpu.json" | tee "$out/bench_gpu.md" || true
    # Several playouts per game per step: B in {1, 64}, S in {64, 256}, K in {1,4,8,16}.
    timeout 80 python3 -m benchmarks.parallel --batch-sizes 1,64 --simulations 64,256 \
      --parallel 1,4,8,16 --json "$out/parallel_gpu.json" | tee "$out/parallel_gpu.md" || true
    # The default agent's ply, part by part, beside mctx: B in {256, 1024}, 4 and 16
    # plies after a 3-ply opening.
    timeout 160 python3 -m benchmarks.profile_ply --games 256,1024 --plies 4,16 --repeats 5 \
      --json "$out/profile_gpu.json" | tee "$out/profile_gpu.md" || true
    # A self-play iteration of `mcgs-jax train`'s defaults beside mctx's, 1024 games.
    timeout 60 python3 -m benchmarks.selfplay_time --games 1024 --simulations 32 --repeats 3 \
      | tee "$out/selfplay_gpu.md" || true
    ;;
  *) echo "usage: bash benchmarks/gpu.sh fetch|run" >&2; exit 2 ;;
esac
