"""The search of a made game that the benchmark scripts share."""


def search_game(
  policy, game, state, num_simulations, key, *, root_key=None, params=None, **options
):
  """`policy` (`mcgs_jax.muzero_policy`, `gumbel_muzero_policy` or `uct_policy`) on
  the batched states `state` `[B, ...]` of `game` (from `mcgs_jax.games.make_game`).

  The root is `game.root` evaluated with `root_key` (default: `key`, the search's
  key); the invalid actions `[B, A]` are the game's, and the game's state keys are the
  transposition keys (`hash_fn`). `options` are the policy's other keywords. Call it
  inside the function that `jax.jit` compiles, so that the whole search is one
  program.
  """
  root = game.root(params, key if root_key is None else root_key, state)
  return policy(
    params,
    key,
    root,
    game.recurrent_fn,
    num_simulations,
    invalid_actions=game.invalid_actions(state),
    hash_fn=game.hash_fn,
    **options,
  )
