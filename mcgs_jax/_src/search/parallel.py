"""Parallel playouts (`GraphOptions.num_parallel`): K playouts per game per step,
selected one after another under virtual loss, evaluated by one `recurrent_fn` call,
then linked and backed up one after another.
"""

import chex
import jax
import jax.numpy as jnp

from mcgs_jax._src import checks, random_bits, types
from mcgs_jax._src.batched import add_at, drop_unless, set_at, take
from mcgs_jax._src.graph import Graph
from mcgs_jax._src.options import GraphOptions
from mcgs_jax._src.search.backup import backup
from mcgs_jax._src.search.descent import select
from mcgs_jax._src.search.expand import edge_action, link
from mcgs_jax._src.search.path import Path, last_edge


def add_path_visits(graph: Graph, path: Path, delta: int) -> Graph:
  """Adds `delta` to the visits of every node and edge on the paths (virtual visits
  of playouts in flight, so that the next selection in the same step goes elsewhere;
  the same call with `-delta` takes them back)."""

  def add(depth: chex.Array, graph: Graph) -> Graph:
    node = drop_unless(depth < path.length, path.nodes[:, depth], graph.capacity)
    return graph.replace(
      edge_visits=add_at(graph.edge_visits, (node, path.actions[:, depth]), delta, mode="drop"),
      node_visits=add_at(graph.node_visits, node, delta, mode="drop"),
    )

  return jax.lax.fori_loop(0, jnp.max(path.length), add, graph)


def add_path_losses(graph: Graph, path: Path) -> Graph:
  """Counts a playout in flight as a loss for every player on its path: each node
  entered below the root takes one virtual visit valued at what makes its edge worth
  -1 to the player who chose it (`r + discount * x = -1`). Call before
  `add_path_visits`; restore `node_values` afterwards."""

  def add(depth: chex.Array, graph: Graph) -> Graph:
    parent, action = path.nodes[:, depth - 1], path.actions[:, depth - 1]
    node = path.nodes[:, depth]
    discount = take(graph.edge_discounts, (parent, action))
    reward = take(graph.edge_rewards, (parent, action))
    safe_discount = jnp.where(discount == 0, 1.0, discount)
    loss = (-1.0 - reward) / safe_discount
    visits = take(graph.node_visits, node)
    value = (visits * take(graph.node_values, node) + loss) / (visits + 1)
    target = drop_unless((depth < path.length) & (discount != 0), node, graph.capacity)
    return graph.replace(
      node_values=set_at(
        graph.node_values, target, value.astype(graph.node_values.dtype), mode="drop"
      )
    )

  return jax.lax.fori_loop(1, jnp.max(path.length), add, graph)


def simulate_in_parallel(
  params: types.Params,
  rng_key: chex.PRNGKey,
  graph: Graph,
  *,
  recurrent_fn: types.RecurrentFn,
  root_action_selection_fn: types.RootActionSelectionFn,
  interior_action_selection_fn: types.InteriorActionSelectionFn,
  max_depth: int,
  options: GraphOptions,
) -> tuple[chex.PRNGKey, Graph]:
  """`K = options.num_parallel` playouts in every game (see `search`).

  The K paths are selected one after another, each counting a virtual visit, valued
  as a loss for the player who chose each edge, on the nodes and edges it passes, so
  the next one spreads out (virtual loss; taken back before backup); one
  `recurrent_fn` call evaluates all `K * B` leaves; then the paths are linked and
  backed up one after another, so two paths that end on the same edge, or reach the
  same new state, share one node. Returns the key for the next step and the graph.
  """
  rng_key, select_key, expand_key = random_bits.split(rng_key, 3)

  def select_one(graph: Graph, key: chex.PRNGKey) -> tuple[Graph, Path]:
    graph, path = select(
      key,
      graph,
      root_action_selection_fn=root_action_selection_fn,
      interior_action_selection_fn=interior_action_selection_fn,
      max_depth=max_depth,
      options=options,
    )
    return add_path_visits(add_path_losses(graph, path), path, 1), path

  node_values = graph.node_values
  graph, paths = jax.lax.scan(select_one, graph, jax.random.split(select_key, options.num_parallel))
  graph, _ = jax.lax.scan(
    lambda g, path: (add_path_visits(g, path, -1), None),
    graph.replace(node_values=node_values),
    paths,
  )
  output, embedding = _evaluate_in_parallel(params, expand_key, graph, paths, recurrent_fn)

  def link_and_backup(graph: Graph, inputs: tuple) -> tuple[Graph, None]:
    path, output, embedding = inputs
    graph, path = link(graph, path, output, embedding, options=options)
    return backup(graph, path, options=options), None

  graph, _ = jax.lax.scan(link_and_backup, graph, (paths, output, embedding))
  return rng_key, graph


def _evaluate_in_parallel(
  params: types.Params,
  rng_key: chex.PRNGKey,
  graph: Graph,
  paths: Path,
  recurrent_fn: types.RecurrentFn,
) -> tuple[types.RecurrentFnOutput, types.Embedding]:
  """`recurrent_fn`'s output and embedding for the last edges of `K` paths per game
  (`paths`' leaves `[K, B, ...]`), from one call on all `K * B` of them; returned
  `[K, B, ...]`. The call's batch is path-major, the order of its outputs and of the
  keys an evaluator splits per row: with the games sharded over devices, these `K *
  B` rows (not the tables) move between devices, there and back."""
  num_parallel, batch_size = paths.length.shape
  parents, edges = jax.vmap(last_edge)(paths)  # [K, B]
  actions = jax.vmap(lambda game_parents, game_edges: edge_action(graph, game_parents, game_edges))(
    parents, edges
  )
  flat = lambda x: x.reshape((num_parallel * batch_size,) + x.shape[2:])
  unflat = lambda x: x.reshape((num_parallel, batch_size) + x.shape[1:])
  parent_embedding = jax.tree_util.tree_map(
    lambda x: flat(jax.vmap(lambda game_parents: take(x, game_parents))(parents)),
    graph.embeddings,
  )
  output, embedding = checks.unpack_recurrent_result(
    recurrent_fn(params, rng_key, flat(actions), parent_embedding)
  )
  checks.check_recurrent_output(
    output, embedding, parent_embedding, num_parallel * batch_size, graph.num_actions
  )
  return jax.tree_util.tree_map(unflat, (output, embedding))
