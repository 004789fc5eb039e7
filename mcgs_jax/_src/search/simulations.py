"""The loop over simulations: `simulate` is one playout in every game (`select`,
`expand`, `backup`), `search` runs many from the graph of `initial`, after checking
its arguments."""

import functools

import chex
import jax

from mcgs_jax._src import checks, random_bits, types
from mcgs_jax._src import options as options_lib
from mcgs_jax._src.checks import check_inputs
from mcgs_jax._src.graph import Graph
from mcgs_jax._src.initial import initial_graph
from mcgs_jax._src.options import DEFAULT_OPTIONS, GraphOptions
from mcgs_jax._src.search.backup import backup
from mcgs_jax._src.search.descent import select
from mcgs_jax._src.search.expand import expand
from mcgs_jax._src.search.parallel import simulate_in_parallel


def simulate(
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
  """One playout in every game: `select`, `expand`, `backup`. Returns the key for
  the next step and the graph."""
  rng_key, select_key, expand_key = random_bits.split(rng_key, 3)
  graph, path = select(
    select_key,
    graph,
    root_action_selection_fn=root_action_selection_fn,
    interior_action_selection_fn=interior_action_selection_fn,
    max_depth=max_depth,
    options=options,
  )
  graph, path = expand(params, expand_key, graph, path, recurrent_fn=recurrent_fn, options=options)
  return rng_key, backup(graph, path, options=options)


def _check_arguments(
  num_simulations: int,
  max_depth: int | None,
  options: GraphOptions,
  recurrent_fn: types.RecurrentFn,
  root_action_selection_fn: types.RootActionSelectionFn,
  interior_action_selection_fn: types.InteriorActionSelectionFn,
) -> tuple[int, int]:
  """Checks `search`'s arguments but the ones `check_inputs` and `initial_graph`
  check, naming the first at fault; returns `(num_simulations, max_depth)` (its
  default filled in)."""
  num_simulations = checks.check_int("num_simulations", num_simulations, minimum=1)
  if not isinstance(options, GraphOptions):
    raise TypeError(f"options must be a mcgs_jax.GraphOptions, got {type(options).__name__}")
  checks.check_callable(
    "recurrent_fn",
    recurrent_fn,
    "(params, key, action [B], embedding) -> (RecurrentFnOutput, embedding)",
  )
  checks.check_callable(
    "root_action_selection_fn", root_action_selection_fn, "(key, graph, node) -> action"
  )
  checks.check_callable(
    "interior_action_selection_fn",
    interior_action_selection_fn,
    "(key, graph, node, depth) -> action",
  )
  if num_simulations % options.num_parallel:
    raise ValueError(
      f"num_simulations ({num_simulations}) must be a multiple of num_parallel "
      f"({options.num_parallel})"
    )
  max_depth = checks.check_int(
    "max_depth", num_simulations if max_depth is None else max_depth, minimum=1
  )
  return num_simulations, max_depth


def search(
  params: types.Params,
  rng_key: chex.PRNGKey,
  *,
  root: types.RootFnOutput,
  recurrent_fn: types.RecurrentFn,
  root_action_selection_fn: types.RootActionSelectionFn,
  interior_action_selection_fn: types.InteriorActionSelectionFn,
  num_simulations: int,
  max_depth: int | None = None,
  invalid_actions: chex.Array | None = None,
  options: GraphOptions = DEFAULT_OPTIONS,
  extra_data: chex.ArrayTree = None,
  loop_fn: types.LoopFn = jax.lax.fori_loop,
  graph: Graph | None = None,
  recycle: Graph | None = None,
) -> Graph:
  """Runs `num_simulations` playouts in every game and returns the graph.

  Args:
    params: passed to `recurrent_fn`.
    rng_key: one key for the whole search (same key, same graph).
    root: `RootFnOutput` with `[B, A]` logits, `[B]` value and `[B, ...]` embedding.
    recurrent_fn: `(params, key, action [B], embedding) -> (RecurrentFnOutput,
      embedding)`, as in mctx.
    root_action_selection_fn, interior_action_selection_fn: selection rules on one
      game's graph (e.g. `mcgs_jax.muzero_action_selection`).
    num_simulations: playouts per game, >= 1.
    max_depth: most edges in one playout (default: `num_simulations`, as mctx).
    invalid_actions: `[B, A]` bool, actions the root may not choose. A row that is
      all True makes that root terminal: nothing is expanded, every playout ends at
      the root, and its visit counts stay zero. A non-finite root value or prior is
      replaced (`finite_root`) and counted in `non_finite_roots`.
    options: `GraphOptions` (transpositions, key, stop rule, capacity, probe
      window, solver, parallel playouts, folding of evaluations). `capacity`
      defaults to `num_simulations + 1`, or to the capacity of `graph`.
    extra_data: stored as `graph.extra_data` (read by selection rules).
    loop_fn: the loop over simulations (`jax.lax.fori_loop`, or `hk.fori_loop`).
    graph: a graph to continue (e.g. from `mcgs_jax.reroot`): its nodes, edges and
      statistics are kept; the root's prior logits and invalid actions are replaced by
      `root`'s. A game whose graph is empty (`num_nodes == 0`, as `reroot` leaves a
      finished game) starts afresh from `root`. Playouts that find the graph full are
      counted in `capacity_overflows`.
    recycle: a finished graph of the same shapes (e.g. the previous move's
      `search_graph`) whose arrays this search overwrites instead of allocating and
      filling new ones, so that setting up costs what the old graph used, not its
      capacity. The result is exactly that of a search without it; the old graph's
      contents are lost. Donate it (carry it through `jax.lax.scan`, or
      `jax.jit(..., donate_argnums=...)`), or XLA copies it first. Rows from
      `num_nodes` up must hold the empty values, as in every graph that a search,
      `mcgs_jax.reroot` or `mcgs_jax.empty_like` returns. Not with `graph`.

  With `options.num_parallel = K > 1`, each step runs K playouts per game under
  virtual loss, with one `recurrent_fn` call for all of them (`simulate_in_parallel`);
  `num_simulations` stays the total per game and must be a multiple of K. With
  `options.solver`, pair the search with selection rules built with `solver=True`
  so that they skip dominated proven edges.

  Returns:
    The `Graph`, with root statistics in `graph.summary()`.
  """
  root, invalid_actions = check_inputs(root, invalid_actions, graph, recycle)
  return search_with_checked_inputs(
    params,
    rng_key,
    root=root,
    recurrent_fn=recurrent_fn,
    root_action_selection_fn=root_action_selection_fn,
    interior_action_selection_fn=interior_action_selection_fn,
    num_simulations=num_simulations,
    max_depth=max_depth,
    invalid_actions=invalid_actions,
    options=options,
    extra_data=extra_data,
    loop_fn=loop_fn,
    graph=graph,
    recycle=recycle,
  )


def search_with_checked_inputs(
  params: types.Params,
  rng_key: chex.PRNGKey,
  *,
  root: types.RootFnOutput,
  recurrent_fn: types.RecurrentFn,
  root_action_selection_fn: types.RootActionSelectionFn,
  interior_action_selection_fn: types.InteriorActionSelectionFn,
  num_simulations: int,
  max_depth: int | None,
  invalid_actions: chex.Array,
  options: GraphOptions,
  extra_data: chex.ArrayTree = None,
  loop_fn: types.LoopFn,
  graph: Graph | None,
  recycle: Graph | None,
) -> Graph:
  """`search` on the root and `invalid_actions [B, A]` bool that `check_inputs`
  returned, and the `graph` and `recycle` it checked (a policy checks them before it
  reads the root, and calls this, so that each check runs once per trace); checks the
  other arguments, at trace time."""
  num_simulations, max_depth = _check_arguments(
    num_simulations,
    max_depth,
    options,
    recurrent_fn,
    root_action_selection_fn,
    interior_action_selection_fn,
  )
  options = options_lib.tree_mode_when_unkeyable(options, root.embedding)
  graph = initial_graph(
    root,
    invalid_actions,
    num_simulations=num_simulations,
    options=options,
    extra_data=extra_data,
    graph=graph,
    recycle=recycle,
  )
  simulate_step = functools.partial(
    simulate if options.num_parallel == 1 else simulate_in_parallel,
    params,
    recurrent_fn=recurrent_fn,
    root_action_selection_fn=root_action_selection_fn,
    interior_action_selection_fn=interior_action_selection_fn,
    max_depth=max_depth,
    options=options,
  )
  num_steps = num_simulations // options.num_parallel
  _, graph = loop_fn(0, num_steps, lambda _, carry: simulate_step(*carry), (rng_key, graph))
  return graph
