"""Tools for testing code that uses `mcgs_jax`: the invariant checker and toy games.

`check_graph(graph, num_simulations, tree_mode=...)` asserts the definitions of
Monte-Carlo Graph Search (KataGo's "Monte-Carlo Graph Search from First
Principles") on every game of a searched graph: `N(n) = k(n) + sum_a N(n, a)`, `Q(n)`
equal to the idempotent formula, root visits = counted playouts + k(root), a tree in
tree mode.

`commuting_game()` is a tiny game written with jnp (no game library): the state is
(total, steps); action a adds a + 1 to the total (mod `modulus`), so every
permutation of the same actions reaches one state: many transpositions. After
`horizon` moves the game ends with a reward that depends on the total. Priors and
values are fixed pseudo-random functions of the state.
"""

import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src.graph import COUNTER_FIELDS, ROW_FIELDS
from mcgs_jax._src.policies import muzero_policy
from mcgs_jax._src.reuse import empty_like, reroot
from mcgs_jax._src.types import RecurrentFnOutput, RootFnOutput

__all__ = ["check_graph", "commuting_game", "make_self_play", "node_formula", "to_numpy"]


def node_formula(graph_np, game, node, *, stored_edge_values=False):
  """`(k + sum_a N(n,a), (k U + sum_a N(n,a) Q(n,a)) / N)` from stored arrays, with
  `k = k(n)` the node's own evaluations and `Q(n,a) = r + g Q(child)` read live, or
  with `stored_edge_values` the `edge_values` the node last used."""
  edge_visits = graph_np["edge_visits"][game, node].astype(np.float64)
  evaluations = float(graph_np["node_evaluations"][game, node])
  if stored_edge_values:
    q = graph_np["edge_values"][game, node].astype(np.float64)
  else:
    children = graph_np["children_index"][game, node]
    child_q = np.where(children >= 0, graph_np["node_values"][game, np.maximum(children, 0)], 0.0)
    q = graph_np["edge_rewards"][game, node] + graph_np["edge_discounts"][game, node] * child_q
  visits = evaluations + edge_visits.sum()
  # Unvisited edges weigh 0 (their stored or live value may be anything finite).
  weighted = np.where(edge_visits > 0, edge_visits * q, 0.0)
  value = (evaluations * graph_np["raw_values"][game, node] + weighted.sum()) / visits
  return visits, value


def to_numpy(graph):
  """Every node, edge and counter table of `graph` (embeddings aside) as numpy."""
  names = [name for name in ROW_FIELDS if name != "embeddings" and getattr(graph, name) is not None]
  return {name: np.asarray(getattr(graph, name)) for name in (*names, *COUNTER_FIELDS, "num_nodes")}


def _check_slots(g, game, used, num_actions):
  """Asserts the slots of compact edges in one game's used rows: each node's actions
  distinct and increasing within `[0, A)`, empty slots (-1) last, with no child, no
  visit and a zero prior."""
  actions = g["children_actions"][game, :used]
  empty = actions < 0
  assert np.all(actions < num_actions), "a slot holds an action past A"
  assert np.all(empty[:, 1:] >= empty[:, :-1]), "an empty slot before a filled one"
  filled_pairs = ~empty[:, 1:]
  assert np.all(np.diff(actions, axis=1)[filled_pairs] > 0), "slot actions not increasing"
  assert np.all(g["children_index"][game, :used][empty] == -1), "an empty slot has a child"
  assert np.all(g["edge_visits"][game, :used][empty] == 0), "an empty slot has visits"
  lowest = np.finfo(g["children_prior_logits"].dtype).min
  assert np.all(g["children_prior_logits"][game, :used][empty] == lowest), "empty slot prior"


def check_graph(
  graph,
  num_simulations,
  *,
  tree_mode,
  q_exact_nodes=None,
  atol=1e-5,
  check_values=True,
  playouts_stop_early=False,
  continued=False,
):
  """Asserts the invariants of every game of a searched graph.

  `q_exact_nodes(game)` lists the nodes whose Q must equal the formula (in graph mode
  other nodes may hold a Q computed before a shared child changed); the root always.
  `num_simulations=None` skips the root count (a continued graph holds more).
  `continued=True` is for what `reroot` returns and for a search continued from it:
  a game may be empty (`num_nodes == 0`: `reroot` empties a game whose move led to
  an unexpanded or terminal child), and in graph mode a kept node's visits, a
  terminal's included, may have come partly through parents that were dropped (so
  only `arrivals <= visits` holds), and the root's Q may be older than its
  children's (a rerooted root has not been searched since they changed through
  other parents); it still equals the formula over the edge values it last used.
  `check_values=False` skips Q (a self-loop makes the formula read its own result).
  `playouts_stop_early=True`: the search ran with a `max_depth` its playouts
  reached. In tree mode a playout cut by `max_depth` counts an edge without entering
  its child, so a child may have fewer visits than its edge; the graph does not
  record `max_depth`, so say so here. The other two causes are read from the graph:
  a game whose capacity was full (`capacity_overflows`) and a proven child (the
  solver's playouts stop at a proven node without entering it, `node_proven`).

  Checked everywhere, shared nodes included: `Q(n)` equals the formula over the
  edge values `n` last used (`edge_values`), `k(n) >= 1`, and no value, prior or
  edge value is NaN or infinite (-inf logits aside, a zero prior). Playouts dropped
  (`parallel_collisions`, `non_finite_evaluations`) count nowhere, and an edge
  marked `edge_non_finite` has no child and no visit. Every row from `num_nodes`
  up holds the empty values of every table (what `recycle=` relies on). With compact
  edges, each node's slots hold distinct actions in increasing order, empty slots
  last, with no child, visit or prior.
  """
  g = to_numpy(graph)
  for game in range(g["num_nodes"].shape[0]):
    used = int(g["num_nodes"][game])
    if continued and used == 0:
      for name, fill in ROW_FIELDS.items():
        if name in g:
          assert np.all(g[name][game] == fill), f"game {game} is empty but {name} is not"
      continue
    _check_tables(graph, g, game, used)
    children = g["children_index"][game, :used]
    edge_visits = g["edge_visits"][game, :used]
    incoming = np.zeros(used)
    np.add.at(incoming, children[children >= 0], edge_visits[children >= 0])
    parents = np.bincount(children[children >= 0], minlength=used)
    assert np.all(parents[1:] >= 1), "a node no edge leads to (created twice?)"
    if tree_mode:
      assert np.all(parents[1:] == 1), "tree mode: a node with two parents"
      assert parents[0] == 0
    overflowed = g["capacity_overflows"][game] > 0
    for node in range(used):
      _check_node(
        g,
        game,
        node,
        incoming[node],
        tree_mode=tree_mode,
        atol=atol,
        check_values=check_values,
        arrivals_may_stop_short=playouts_stop_early or overflowed or g["node_proven"][game, node],
        continued=continued,
      )
    exact = [] if continued and not tree_mode else [0]
    exact += list(q_exact_nodes(game) if q_exact_nodes else [])
    if tree_mode:
      exact = list(range(used))
    for node in exact if check_values else []:
      _check_exact_value(g, game, node, atol)
    if (
      num_simulations is not None
      and g["capacity_overflows"][game] == 0
      and not g["node_terminal"][game, 0]
    ):
      counted = num_simulations - g["parallel_collisions"][game] - g["non_finite_evaluations"][game]
      assert g["node_visits"][game, 0] == counted + g["node_evaluations"][game, 0]
      assert edge_visits[0].sum() == counted


def _check_exact_value(g, game, node, atol):
  """Q of a non-terminal `node` equals the idempotent formula over its children's
  current values (the solver's exact value where it proved the node)."""
  if g["node_terminal"][game, node]:
    return
  _, expected_value = node_formula(g, game, node)
  if g["node_proven"][game, node]:  # the solver's exact value replaces the formula
    expected_value = g["proven_values"][game, node]
  np.testing.assert_allclose(
    g["node_values"][game, node],
    expected_value,
    atol=atol,
    err_msg=f"game {game} node {node}: Q != idempotent formula",
  )


def _check_tables(graph, g, game, used):
  """`check_graph`'s checks of one game's tables as a whole: empty rows from
  `num_nodes` up, child indices in range, evaluations, finite values, priors,
  non-finite edges and compact slots."""
  children = g["children_index"][game, :used]
  edge_visits = g["edge_visits"][game, :used]
  assert 1 <= used <= g["node_visits"].shape[1]
  for name, fill in ROW_FIELDS.items():
    if name in g:
      assert np.all(g[name][game, used:] == fill), f"unused rows of {name} are not empty"
  for leaf in jax.tree_util.tree_leaves(graph.embeddings):
    assert np.all(np.asarray(leaf)[game, used:] == ROW_FIELDS["embeddings"]), (
      "unused rows of embeddings are not empty"
    )
  assert np.all(children < used), "a child index points past num_nodes"
  assert np.all((edge_visits == 0) | (children >= 0)), "a visited edge has no child"
  assert np.all(edge_visits >= 0)
  evaluations = g["node_evaluations"][game, :used]
  assert np.all(evaluations >= 1), "a used node without an evaluation"
  assert np.all(g["node_evaluations"][game, used:] == 0)
  assert np.sum(evaluations - 1) <= g["folded_evaluations"][game], "unfolded k > 1"
  for name in ("raw_values", "node_values", "edge_values", "edge_rewards", "edge_discounts"):
    assert np.all(np.isfinite(g[name][game, :used])), f"game {game}: non-finite {name}"
  assert not np.any(np.isnan(g["children_prior_logits"][game, :used]))
  assert not np.any(g["children_prior_logits"][game, :used] == np.inf)
  marked = g["edge_non_finite"][game, :used]
  assert np.all(children[marked] == -1) and np.all(edge_visits[marked] == 0), (
    "an edge marked non-finite has a child or visits"
  )
  if "children_actions" in g:
    _check_slots(g, game, used, graph.num_actions)


def _check_node(
  g, game, node, incoming, *, tree_mode, atol, check_values, arrivals_may_stop_short, continued
):
  """`check_graph`'s checks of one node: its visits against its evaluations, edges and
  `incoming` visits through the edges into it (which may exceed its visits where
  `arrivals_may_stop_short`: playouts may count an edge into it and stop there), and
  its Q over its stored edge values."""
  visits = g["node_visits"][game, node]
  assert visits >= 1
  if g["node_terminal"][game, node]:
    assert g["edge_visits"][game, node].sum() == 0, "a terminal node has visited edges"
    if node and (tree_mode or not continued):
      assert incoming == visits, "terminal visits must equal arrivals"
    elif node:
      assert incoming <= visits, "more arrivals at a terminal than its visits"
    return
  expected_visits, _ = node_formula(g, game, node)
  assert visits == expected_visits, f"game {game} node {node}: N != k + sum N(n,a)"
  if check_values and not g["node_proven"][game, node]:
    _, stored_value = node_formula(g, game, node, stored_edge_values=True)
    np.testing.assert_allclose(
      g["node_values"][game, node],
      stored_value,
      atol=atol,
      err_msg=f"game {game} node {node}: Q != formula over its edge_values",
    )
  if node:
    if tree_mode and not arrivals_may_stop_short:
      assert incoming == visits, "tree mode: N(child) must equal N(parent, a)"
    elif not continued:
      assert incoming >= visits, "more passes through a node than edges into it"


def commuting_game(num_actions=3, modulus=11, horizon=6):
  def evaluate(total, steps):
    angle = total.astype(jnp.float32) * 1.7 + steps.astype(jnp.float32) * 0.3
    logits = jnp.sin(angle[:, None] * (1.0 + jnp.arange(num_actions)))
    return logits, 0.5 * jnp.cos(angle)

  def recurrent_fn(params, rng_key, action, embedding):
    del params, rng_key
    total, steps = embedding["total"], embedding["steps"]
    total = (total + action + 1) % modulus
    steps = steps + 1
    done = steps >= horizon
    logits, value = evaluate(total, steps)
    reward = jnp.where(done, jnp.sin(total.astype(jnp.float32)), 0.0)
    discount = jnp.where(done, 0.0, -1.0)
    return RecurrentFnOutput(reward=reward, discount=discount, prior_logits=logits, value=value), {
      "total": total,
      "steps": steps,
    }

  def root(batch_size, offset=0):
    total = (jnp.arange(batch_size, dtype=jnp.int32) + offset) % modulus
    steps = jnp.zeros((batch_size,), jnp.int32)
    logits, value = evaluate(total, steps)
    return RootFnOutput(
      prior_logits=logits, value=value, embedding={"total": total, "steps": steps}
    )

  return root, recurrent_fn


def make_self_play(game_name, *, batch_size, num_simulations, capacity, transpositions=True):
  """`(game, init, step)`: `game_name`'s `Game` (`mcgs_jax.games.make_game`) and a
  jitted self-play step that continues the rerooted graph.

  `init(key) -> (state, graph)` gives the states and a graph whose games are all
  empty (any graph with `num_nodes == 0` is replaced by a fresh one), so `step`
  compiles once.
  `step(key, state, graph) -> (state, graph, action, carried, legal)`, where
  `carried` `[B]` is the root visits the search started from (0 for a fresh root).
  """
  from mcgs_jax.games.adapter import make_game

  game = make_game(game_name)

  def policy(key, state, graph):
    finished = state.terminated | state.truncated
    invalid = game.invalid_actions(state) | finished[:, None]
    root = game.root(None, key, state)
    return muzero_policy(
      None,
      key,
      root,
      game.recurrent_fn,
      num_simulations,
      invalid_actions=invalid,
      hash_fn=game.hash_fn,
      transpositions=transpositions,
      capacity=capacity,
      graph=graph,
    ), finished

  @jax.jit
  def step(key, state, graph):
    carried = graph.node_visits[:, 0]
    out, finished = policy(key, state, graph)
    legal = state.legal_action_mask[jnp.arange(batch_size), out.action] | finished
    new_state = game.step(state, out.action)
    return new_state, reroot(out.search_graph, out.action), out.action, carried, legal

  def init(key):
    state = game.init(key, batch_size)
    shapes = jax.eval_shape(lambda k, s: policy(k, s, None)[0].search_graph, key, state)
    return state, empty_like(shapes)

  return game, init, step
