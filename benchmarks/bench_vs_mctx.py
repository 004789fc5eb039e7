"""Speed of mcgs_jax against mctx, side by side in one process.

Same as `mcgs-jax bench`; see `mcgs_jax/benchmark.py` for what is measured.
Example: python -m benchmarks.bench_vs_mctx --batch-sizes 1024 --simulations 64
"""

from mcgs_jax.apps.benchmark.speed import main

if __name__ == "__main__":
  main()
