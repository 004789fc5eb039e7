"""PUCT's random tie-break, drawn only where it can change the choice.

mctx's PUCT adds `1e-7 * uniform(key, [A])` to every score before the
argmax, so that equal scores are broken at random; this library does the same, so
that tree mode chooses as mctx does, bit for bit. Those floats can change the choice
only where another valid action comes within the largest tie-break of the best
score. With `s` the scores, `j` the first valid action with the largest of them,
`c = fl(1e-7)` and the tie-break `n_i = fl(c * u_i)`, `u_i` in [0, 1), so
`0 <= n_i <= c`: rounding is monotone, so `fl(s_j + n_j) >= s_j` and
`fl(s_i + n_i) <= fl(s_i + c)`. When `fl(s_i + c) < s_j` for every other valid `i`
and `s_j > -inf` (so that `j` also beats the excluded actions' `-inf`), `j` wins
whatever the tie-break is. A NaN score is never decided this way.
`tie_broken_argmax` is written for one game; vmapped over a batch it draws the floats
of the whole batch only when some game needs them (one `lax.cond` on the batch) and
otherwise returns the plain argmax: the same action in every game, without the hash.
A game can say that its choice is not used (`drawn=False`, e.g. at a terminal node,
where no playout continues, though the batched selection still runs the rule there):
it then takes the plain argmax and never makes the batch draw.
"""

import chex
import jax
import jax.numpy as jnp

from mcgs_jax._src.random_bits import uniform, uniform_at
from mcgs_jax._src.rows import row_max

# Scale of the random tie-break added to every score (as mctx, so that equal scores
# are broken the same way for the same key).
TIE_BREAK_SCALE = 1e-7


def masked_argmax(scores: chex.Array, invalid_actions: chex.Array | None) -> chex.Array:
  """The valid action with the highest score (action 0 when none is valid)."""
  if invalid_actions is not None:
    # -inf only reaches argmax, never a softmax, so it cannot produce NaN.
    scores = jnp.where(invalid_actions, -jnp.inf, scores)
  return jnp.argmax(scores, axis=-1).astype(jnp.int32)


def _drawn_argmax(
  rng_key: chex.PRNGKey,
  scores: chex.Array,
  invalid_actions: chex.Array,
  drawn: chex.Array,
  actions: chex.Array | None,
) -> chex.Array:
  """One game's choice with the tie-break drawn (or the plain argmax where not
  `drawn`); `actions`: see `tie_broken_argmax`."""
  if actions is None:
    floats = uniform(rng_key, scores.shape)
  else:
    floats = uniform_at(rng_key, jnp.maximum(actions, 0))
  tie_break = TIE_BREAK_SCALE * floats
  return jnp.where(
    drawn,
    masked_argmax(scores + tie_break, invalid_actions),
    masked_argmax(scores, invalid_actions),
  )


def decided_without_tie_break(
  scores: chex.Array, invalid_actions: chex.Array, drawn: chex.Array
) -> chex.Array:
  """`[...]` bool for `scores [..., A]`: no tie-break can change the choice (module
  doc), or none is drawn."""
  best = row_max(jnp.where(invalid_actions, -jnp.inf, scores))
  # fl(s_i + c) >= s_j: action i may reach the best score (j itself always does; NaN
  # compares False, so a row with a NaN best has no contender).
  reach = scores + jnp.float32(TIE_BREAK_SCALE) >= best[..., None]
  contenders = jnp.sum(reach & ~invalid_actions, axis=-1)
  return ((contenders == 1) & (best > -jnp.inf)) | ~drawn


@jax.custom_batching.custom_vmap
def tie_broken_argmax(
  rng_key: chex.PRNGKey,
  scores: chex.Array,
  invalid_actions: chex.Array,
  drawn: chex.Array,
  actions: chex.Array | None = None,
) -> chex.Array:
  """`masked_argmax(scores + TIE_BREAK_SCALE * uniform(rng_key, [A]), invalid_actions)`
  for one game, bit for bit, drawing the floats only where they can change it.

  Args:
    rng_key: the game's key (raw or typed).
    scores: `[A]` float32.
    invalid_actions: `[A]` bool, actions never chosen.
    drawn: scalar bool; False where the choice is not used: the plain argmax, no
      tie-break.
    actions: `[A]` int32, the action of each entry (compact edges: a node's
      slots), whose floats the tie-break draws, so that a slot gets its action's
      float of a dense row; None: entry `i` is action `i`.

  Returns:
    Scalar int32, the valid action with the highest score (action 0 when none is).
  """
  return _drawn_argmax(rng_key, scores, invalid_actions, drawn, actions)


@tie_broken_argmax.def_vmap
def _tie_broken_argmax_batch(
  axis_size: int,
  in_batched: list[bool],
  rng_key: chex.PRNGKey,
  scores: chex.Array,
  invalid_actions: chex.Array,
  drawn: chex.Array,
  actions: chex.Array | None = None,
) -> tuple[chex.Array, bool]:
  """`tie_broken_argmax` of `axis_size` games: the plain argmax when no game needs
  the tie-break, else the tie-break drawn in every game that draws."""
  arguments = (rng_key, scores, invalid_actions, drawn, actions)
  rng_key, scores, invalid_actions, drawn, actions = (
    value if batched or value is None else jnp.broadcast_to(value, (axis_size, *jnp.shape(value)))
    for value, batched in zip(arguments, in_batched, strict=True)
  )
  choice = jax.lax.cond(
    jnp.all(decided_without_tie_break(scores, invalid_actions, drawn)),
    lambda: masked_argmax(scores, invalid_actions),
    lambda: jax.vmap(_drawn_argmax)(rng_key, scores, invalid_actions, drawn, actions),
  )
  return choice, True
