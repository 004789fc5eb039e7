"""The `mcgs-jax` command line: `main` (`command_line`) dispatches to the commands,
one module each (`arena_command`, `bench_command`, `evaluate_command`,
`play_command`, `search_command`, `train_command`); `args` holds the parser class and
the checks the commands share.
"""

from mcgs_jax.apps.cli.command_line import cache_dir, enable_compilation_cache, main

__all__ = ["cache_dir", "enable_compilation_cache", "main"]
