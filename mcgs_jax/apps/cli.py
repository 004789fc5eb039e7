"""The `mcgs-jax` command."""

import sys

USAGE = """usage: mcgs-jax COMMAND [options]

commands:
  arena    a match between two search agents: score and Elo (default: graph against
           tree on connect four; see `mcgs-jax arena -h`)
  bench    speed of mcgs_jax against mctx on a pgx game (see `mcgs-jax bench -h`)
  search   search positions and print root tables (see `mcgs-jax search -h`)
"""


def main(argv=None):
  argv = list(sys.argv[1:] if argv is None else argv)
  if not argv or argv[0] in ("-h", "--help"):
    print(USAGE, end="")
    return 0 if argv else 2
  command, rest = argv[0], argv[1:]
  if command == "arena":
    from mcgs_jax.apps import arena_command
    return arena_command.main(rest)
  if command == "bench":
    from mcgs_jax.apps import benchmark
    benchmark.main(rest)
    return 0
  if command == "search":
    from mcgs_jax.apps import search_command
    return search_command.main(rest)
  print(f"mcgs-jax: unknown command {command!r}\n{USAGE}", end="", file=sys.stderr)
  return 2


if __name__ == "__main__":
  sys.exit(main())
