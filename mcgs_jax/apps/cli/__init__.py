"""The `mcgs-jax` command line: `main` dispatches to the commands (`search`, `play`,
`arena` here, `train` and `bench` in their packages); `args` holds the parser class
and the checks the commands share.
"""

from mcgs_jax.apps.cli.command_line import cache_dir, enable_compilation_cache, main

__all__ = ["cache_dir", "enable_compilation_cache", "main"]
