"""The benchmark suite: `python -m benchmarks CASE [--part PART] [--tiny] [--out FILE]`
from the repository's root (benchmarks/__main__.py, README.md). Each experiment is a
module, `benchmarks/PART.py`, with a `run(argv)` the runner calls; the modules import
each other (and the checkout's mcgs_jax) as `benchmarks.PART`."""
