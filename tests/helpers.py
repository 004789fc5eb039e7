"""Set-ups that several test files share: a search of a made game from its states,
and the command line that runs a benchmark script."""

import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent


def search_game(
  policy,
  game,
  state,
  num_simulations,
  key,
  *,
  root_key=None,
  params=None,
  also_invalid=None,
  **options,
):
  """`policy` (`mcgs_jax.muzero_policy`, `gumbel_muzero_policy` or `uct_policy`) on
  the batched states `state` `[B, ...]` of `game` (from `mcgs_jax.games.make_game`).

  The root is `game.root` evaluated with `root_key` (default: `key`, the search's
  key); the invalid actions `[B, A]` are the game's, and also those of `also_invalid`
  (bool `[B, A]`) when given; the game's state keys are the transposition keys
  (`hash_fn`). `options` are the policy's other keywords. Call it inside the function
  that `jax.jit` compiles, so that the whole search is one program, and pass what
  varies between tests (states, masks, settings) as arguments rather than baking it
  into a helper's closure.
  """
  root = game.root(params, key if root_key is None else root_key, state)
  invalid_actions = game.invalid_actions(state)
  if also_invalid is not None:
    invalid_actions = invalid_actions | also_invalid
  return policy(
    params,
    key,
    root,
    game.recurrent_fn,
    num_simulations,
    invalid_actions=invalid_actions,
    hash_fn=game.hash_fn,
    **options,
  )


def benchmark_command(script, *args):
  """The command line that runs `benchmarks/<script>.py` as the module
  `benchmarks.<script>`, with `args`. The repository is put at the end of the new
  process's `sys.path`, after the installed packages, so that the installed mcgs_jax
  (the wheel `.ci/run` tests) is the one imported where there is one."""
  code = (
    f"import runpy, sys; sys.path.append({str(REPO)!r}); "
    f"runpy.run_module('benchmarks.{script}', run_name='__main__', alter_sys=True)"
  )
  return [sys.executable, "-c", code, *args]
