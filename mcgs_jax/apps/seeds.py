"""The seeds the applications take (`--seed`, `Config.seed`): integers in `[0,
MAX_SEED]`, the range of a 32-bit unsigned integer."""

MAX_SEED = 2**32 - 1
