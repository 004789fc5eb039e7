"""Benchmark scripts. Run each from the repository root as a module,
`python -m benchmarks.<script>`, so that the scripts import each other (and the
checkout's mcgs_jax) as `benchmarks.<script>`; their results go to
benchmarks/RESULTS.md."""
