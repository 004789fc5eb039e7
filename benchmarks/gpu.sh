#!/usr/bin/env bash
# Speed of mcgs_jax against mctx on a lent GPU, in one call of at most nine minutes:
# mcgs_jax.apps.benchmark (throughput and S-scaling), benchmarks/num_parallel.py
# (num_parallel), benchmarks/profile_ply.py (the default agent's ply part by part:
# reroot, search with and without the solver, tree mode, evaluations, mctx) and
# benchmarks/selfplay_time.py (a default self-play iteration beside mctx's).
#
# Here (once, in the repository root), fetch the pure-Python wheels the GPU image
# lacks:   bash benchmarks/gpu.sh fetch
# There (one device call, carrying .whl):
#          bash benchmarks/gpu.sh run
# and, in a second call of at most four minutes, chess: the dense graph, compact edges
# (where GraphOptions has max_children) and mctx:
#          bash benchmarks/gpu.sh chess
# Writes the markdown table to $OUT/bench_gpu.md (or stdout) for benchmarks/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

setup() {  # the fetched wheels on the path, the GPU named; sets $out
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
  out="${OUT:-.}"
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
}

case "${1:-run}" in
  fetch)
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    mkdir -p .whl
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp -d .whl mctx==0.0.71 pgx==2.6.0 svgwrite
    ;;
  run)
    setup
    # B in {1, 1024, 8192} x S in {64, 256}; per-simulation scaling at B=256; capacity
    # alone at B=1024, S=64, new and recycled tables. Each part prints a JSON line per measurement as it goes,
    # so a part cut by its timeout still leaves its finished rows.
    timeout 250 python3 -m mcgs_jax.apps.benchmark --batch-sizes 1,1024,8192 --simulations 64,256 \
      --scaling-batch-size 256 --scaling-simulations 64,1024 --capacities 65,1025,4097 \
      --capacity-batch-size 1024 --repeats 3 \
      --json "$out/bench_gpu.json" | tee "$out/bench_gpu.md" || true
    # Several playouts per game per step: B in {1, 64}, S in {64, 256}, K in {1,4,8,16}.
    timeout 80 python3 -m benchmarks speed --part parallel \
      --out "$out/parallel_gpu_record.json" --batch-sizes 1,64 --simulations 64,256 \
      --parallel 1,4,8,16 --json "$out/parallel_gpu.json" | tee "$out/parallel_gpu.md" || true
    # The default agent's ply, part by part, beside mctx: B in {256, 1024}, 4 and 16
    # plies after a 3-ply opening.
    timeout 160 python3 -m benchmarks speed --part profile_ply \
      --out "$out/profile_gpu_record.json" --games 256,1024 --plies 4,16 --repeats 5 \
      --json "$out/profile_gpu.json" | tee "$out/profile_gpu.md" || true
    # A self-play iteration of `mcgs-jax train`'s defaults beside mctx's, 1024 games.
    timeout 60 python3 -m benchmarks speed --part selfplay_time \
      --out "$out/selfplay_gpu_record.json" --games 1024 --simulations 32 --repeats 3 \
      | tee "$out/selfplay_gpu.md" || true
    ;;
  chess)
    setup
    # Chess, B=256, S=64: the dense graph (4672 edges per node), compact edges
    # (GraphOptions.max_children=32) and mctx; compile and median run seconds. The
    # compact row waits for a mcgs_jax whose GraphOptions has max_children.
    compact=none
    if python3 -c "import mcgs_jax; mcgs_jax.GraphOptions(max_children=32)" 2>/dev/null; then
      compact=32
    fi
    timeout 240 python3 - 256 64 "$compact" <<'EOF' | tee "$out/chess_gpu.md" || true
import sys
import jax
from mcgs_jax.apps.benchmark import timing
from mcgs_jax.games import evaluators, make_game, networks
games, simulations, compact = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
apply_fn, params = networks.init_network(make_game("chess").env, jax.random.PRNGKey(0))
game = make_game("chess", evaluators.network_evaluator(apply_fn))
state = timing.random_positions(game, jax.random.PRNGKey(1), games, 8)
policies = {"graph": {}, "mctx": {}}
if compact != "none":
  policies[f"graph K={compact}"] = dict(max_children=int(compact))
else:
  print("no compact-edge row: this mcgs_jax's GraphOptions has no max_children yet")
for name, options in policies.items():
  policy = timing.make_policy(game, name.split()[0], simulations, **options)
  compile_s, run_s = timing.time_policy(policy, params, jax.random.PRNGKey(2), state, 3)
  print(f"chess B={games} S={simulations} {name}: compile {compile_s:.1f} s, run {run_s:.4f} s")
EOF
    ;;
  *) echo "usage: bash benchmarks/gpu.sh fetch|run|chess" >&2; exit 2 ;;
esac
