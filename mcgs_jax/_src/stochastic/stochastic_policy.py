"""`stochastic_muzero_policy`: the policy that searches the graph of `chance_nodes`."""

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp
from typing_extensions import Unpack

from mcgs_jax._src import action_selection, hashing, qtransforms, types
from mcgs_jax._src import options as options_lib
from mcgs_jax._src.checks import check_inputs, check_puct
from mcgs_jax._src.graph import ROOT_INDEX, Graph
from mcgs_jax._src.logits import dirichlet_prior, mask_invalid_actions
from mcgs_jax._src.options import GraphKeywords, GraphOptions, unkeyable
from mcgs_jax._src.readout import sample_from_visits
from mcgs_jax._src.search import search_with_checked_inputs
from mcgs_jax._src.stochastic import chance_nodes
from mcgs_jax._src.types import (
  ChanceData,
  ChanceRecurrentFn,
  DecisionRecurrentFn,
  StochasticGraph,
  StochasticRecurrentState,
)

CALLER = "stochastic_muzero_policy"


def stochastic_muzero_policy(
  params: types.Params,
  rng_key: chex.PRNGKey,
  root: types.RootFnOutput,
  decision_recurrent_fn: DecisionRecurrentFn,
  chance_recurrent_fn: ChanceRecurrentFn,
  num_simulations: int,
  invalid_actions: chex.Array | None = None,
  max_depth: int | None = None,
  loop_fn: types.LoopFn = jax.lax.fori_loop,
  *,
  qtransform: types.QTransform = qtransforms.qtransform_by_parent_and_siblings,
  dirichlet_fraction: float = 0.25,
  dirichlet_alpha: float = 0.3,
  pb_c_init: float = 1.25,
  pb_c_base: float = 19652.0,
  temperature: float = 1.0,
  afterstate_hash_fn: types.HashFn | None = None,
  graph: Graph | None = None,
  recycle: Graph | None = None,
  options: GraphOptions | None = None,
  **graph_options: Unpack[GraphKeywords],
) -> types.PolicyOutput:
  """Stochastic MuZero search with chance nodes on a graph.

  Same arguments and defaults as `mctx.stochastic_muzero_policy`, plus the keys
  and the graph keywords. With `transpositions=False` it is mctx's search, and
  with the same key it gives mctx's root visit counts. Every real move costs two
  simulations (the decision edge, then the chance edge).

  A chance node's value is the visit-weighted expectation over its outcomes,
  `Q(n) = (U(n) + sum_c N(n, c) Q(n, c)) / N(n)` with `U(n)` the afterstate
  value (as mctx); in a graph `N(n, c)` are the chance node's own edge visits, so
  visits that reach a shared state through other parents do not bias the weights.
  A move's reward may sit on the state-to-afterstate edge
  (`DecisionRecurrentFnOutput.reward`, None in mctx: 0) or on the outcome edge
  (`ChanceRecurrentFnOutput.reward`); put it where the afterstate key need not
  hold it.

  Args:
    params: passed to both recurrent functions.
    rng_key: the only source of randomness.
    root: `RootFnOutput`: prior logits `[B, A]`, value `[B]`, state embedding.
    decision_recurrent_fn: `(params, key, action [B], state_embedding) ->
      (DecisionRecurrentFnOutput(chance_logits [B, C], afterstate_value [B],
      reward [B] or None), afterstate_embedding)`.
    chance_recurrent_fn: `(params, key, outcome [B], afterstate_embedding) ->
      (ChanceRecurrentFnOutput(action_logits [B, A], value [B], reward [B],
      discount [B]), state_embedding)`.
    num_simulations: playouts per game, >= 1 (two per real move).
    invalid_actions: `[B, A]` bool, actions the root may not take.
    max_depth: most edges in a playout, decision and chance edges both counted
      (default `num_simulations`).
    loop_fn: loop over simulations.
    qtransform, dirichlet_fraction, dirichlet_alpha, pb_c_init, pb_c_base,
      temperature: as in mctx (PUCT at decision nodes); a `dirichlet_fraction`
      known to be 0 draws no noise (`dirichlet_prior`).
    afterstate_hash_fn: `afterstate_embedding [B, ...] -> uint32 [B, L]`, the key
      of a chance node (None: `mcgs_jax.hash_pytree`, every bit of the afterstate).
    graph: a previous graph to continue, rerooted by the action played and then by
      the chance outcome that followed:
      `mg.reroot(mg.reroot(previous.search_graph, action), outcome)`. A game whose
      graph is empty, or whose root is not a decision node, starts afresh (the
      second counted in `root_key_mismatches`).
    recycle: a finished graph of this policy, same shapes, whose arrays this search
      overwrites (see `mcgs_jax.muzero_policy`). Not with `graph`.
    options: the graph options as one `mcgs_jax.GraphOptions` (see
      `mcgs_jax.muzero_policy`). Not with `**graph_options`.
    **graph_options: the fields of `mcgs_jax.GraphOptions` as flat keywords;
      `hash_fn` keys the states of decision nodes. `solver=True` is refused (the
      MCTS-solver proves a node from its best proven edge, which a chance node's
      expectation is not).
      With `num_parallel`, the virtual loss counts each playout in flight as a
      value of -1, meant for values in [-1, 1].

  Returns:
    `PolicyOutput(action [B], action_weights [B, A], search_graph)`, where
    `search_graph` is a `StochasticGraph` (`W = max(A, C)` columns; `summary()`
    over the `A` root actions, as mctx).
  """
  _check_functions(decision_recurrent_fn, chance_recurrent_fn, afterstate_hash_fn)
  options = options_lib.resolve(CALLER, options, graph_options)
  root, invalid_actions = check_inputs(root, invalid_actions, graph, recycle)
  _refuse_solver(options)
  puct = _puct_rule(pb_c_init, pb_c_base, temperature, qtransform)
  rng_key, dirichlet_key, search_key = jax.random.split(rng_key, 3)
  model = _probe_functions(params, rng_key, root, decision_recurrent_fn, chance_recurrent_fn)
  noisy_root = _noisy_root(dirichlet_key, root, dirichlet_fraction, dirichlet_alpha)
  options = _chance_options(options, root.embedding, model.afterstate_template, afterstate_hash_fn)
  searched = _search(
    params,
    search_key,
    noisy_root,
    invalid_actions,
    model=model,
    puct=puct,
    num_simulations=num_simulations,
    max_depth=max_depth,
    options=options,
    loop_fn=loop_fn,
    graph=graph,
    recycle=recycle,
  )
  return sample_from_visits(
    rng_key, StochasticGraph.from_graph(searched), options=options, temperature=temperature
  )


def _puct_rule(
  pb_c_init: float, pb_c_base: float, temperature: float, qtransform: types.QTransform
) -> types.InteriorActionSelectionFn:
  """The PUCT rule decision nodes select by (`make_muzero_selection`'s interior
  rule), its settings and the policy's `temperature` checked (`check_puct`)."""
  check_puct(
    pb_c_init=pb_c_init, pb_c_base=pb_c_base, temperature=temperature, qtransform=qtransform
  )
  return action_selection.make_muzero_selection(
    pb_c_init=pb_c_init, pb_c_base=pb_c_base, qtransform=qtransform
  )[1]


def _noisy_root(
  dirichlet_key: chex.PRNGKey, root: types.RootFnOutput, fraction: float, alpha: float
) -> types.RootFnOutput:
  """`root` with Dirichlet noise (`dirichlet_prior`: `fraction` of it, drawn with
  `alpha`) mixed into its prior, as mctx adds it; logits `[B, A]`."""
  noisy_logits = dirichlet_prior(dirichlet_key, root.prior_logits, fraction=fraction, alpha=alpha)
  return root.replace(prior_logits=noisy_logits)


@dataclasses.dataclass(frozen=True)
class _ChanceModel:
  """The stochastic model's two functions and what tracing them tells."""

  decision_recurrent_fn: DecisionRecurrentFn
  chance_recurrent_fn: ChanceRecurrentFn
  num_chance_outcomes: int  # C, the outcomes of a chance node.
  afterstate_template: chex.ArrayTree  # The afterstate's shapes and dtypes ([B, ...]).


def _search(
  params: types.Params,
  search_key: chex.PRNGKey,
  root: types.RootFnOutput,
  invalid_actions: chex.Array,
  *,
  model: _ChanceModel,
  puct: types.InteriorActionSelectionFn,
  num_simulations: int,
  max_depth: int | None,
  options: GraphOptions,
  loop_fn: types.LoopFn,
  graph: Graph | None,
  recycle: Graph | None,
) -> Graph:
  """The search on the graph of decision and chance nodes, from `root` (`[B, A]`
  logits, noise added) and `invalid_actions [B, A]`, checked; decision nodes select
  by the PUCT rule `puct`, chance nodes by their outcome probabilities (`C` of
  them: `model`)."""
  num_actions, num_chance_outcomes = invalid_actions.shape[1], model.num_chance_outcomes
  width = max(num_actions, num_chance_outcomes)
  wide_root, wide_invalid_actions = _wide_root(
    root, invalid_actions, width, model.afterstate_template
  )
  root_rule, interior_rule = chance_nodes.make_selection(
    puct,
    num_actions=num_actions,
    num_chance_outcomes=num_chance_outcomes,
  )
  return search_with_checked_inputs(
    params,
    search_key,
    root=wide_root,
    recurrent_fn=chance_nodes.make_recurrent_fn(
      model.decision_recurrent_fn,
      model.chance_recurrent_fn,
      num_actions=num_actions,
      num_chance_outcomes=num_chance_outcomes,
      afterstate_template=model.afterstate_template,
    ),
    root_action_selection_fn=root_rule,
    interior_action_selection_fn=interior_rule,
    num_simulations=num_simulations,
    max_depth=max_depth,
    invalid_actions=wide_invalid_actions,
    options=options,
    extra_data=ChanceData(root_invalid_actions=invalid_actions),
    loop_fn=loop_fn,
    graph=None if graph is None else _continuable(graph, width),
    recycle=None if recycle is None else _plain(recycle),
  )


def _check_functions(
  decision_recurrent_fn: Any, chance_recurrent_fn: Any, afterstate_hash_fn: Any
) -> None:
  """TypeError naming the function of the stochastic policy that is not callable."""
  for name, fn in (
    ("decision_recurrent_fn", decision_recurrent_fn),
    ("chance_recurrent_fn", chance_recurrent_fn),
  ):
    if not callable(fn):
      raise TypeError(f"{CALLER}: {name} must be callable, got {fn!r}")
  if afterstate_hash_fn is not None and not callable(afterstate_hash_fn):
    raise TypeError(
      f"{CALLER}: afterstate_hash_fn must be callable (afterstate "
      f"embedding -> uint32 [B, L]), got {afterstate_hash_fn!r}"
    )


def _refuse_solver(options: GraphOptions) -> None:
  """ValueError for `solver=True`: a chance node's value is an expectation over
  outcomes, which the MCTS-solver's proof rules do not compute."""
  if options.solver:
    raise ValueError(
      f"{CALLER}: solver=True is not supported with chance nodes (a "
      "chance node's value is an expectation over outcomes, which the "
      "MCTS-solver's proof rules do not compute); use solver=False"
    )


def _wide_root(
  root: types.RootFnOutput,
  invalid_actions: chex.Array,
  width: int,
  afterstate_template: chex.ArrayTree,
) -> tuple[types.RootFnOutput, chex.Array]:
  """`(root, invalid_actions [B, W])` of the stochastic graph: decision and chance
  nodes share `W = max(A, C)` columns, so the root (`[B, A]` logits, noise added)
  is a decision node whose columns past `A` are invalid."""
  num_actions = invalid_actions.shape[1]
  wide_invalid_actions = jnp.pad(
    invalid_actions, ((0, 0), (0, width - num_actions)), constant_values=True
  )
  wide_logits = chance_nodes.pad_columns(root.prior_logits, width)
  wide_root = _decision_root(
    root.replace(prior_logits=mask_invalid_actions(wide_logits, wide_invalid_actions)),
    afterstate_template,
  )
  return wide_root, wide_invalid_actions


def _decision_root(
  root: types.RootFnOutput, afterstate_template: chex.ArrayTree
) -> types.RootFnOutput:
  """`root`, its logits already `W` columns wide, as a decision node of the
  stochastic graph: the state wrapped in a `StochasticRecurrentState` with a zero
  afterstate."""
  return root.replace(
    embedding=StochasticRecurrentState(
      state_embedding=root.embedding,
      afterstate_embedding=jax.tree_util.tree_map(
        lambda leaf: jnp.zeros(leaf.shape, leaf.dtype), afterstate_template
      ),
      is_decision_node=jnp.ones((root.value.shape[0],), jnp.bool_),
    )
  )


def _chance_options(
  options: GraphOptions,
  state_embedding: types.Embedding,
  afterstate_template: chex.ArrayTree,
  afterstate_hash_fn: types.HashFn | None,
) -> GraphOptions:
  """`options` with the key of a `StochasticRecurrentState` (`chance_nodes.make_key_fn`);
  tree mode when the states or the afterstates are `unkeyable`, as
  `tree_mode_when_unkeyable` does for a plain search."""
  if options.transpositions and (
    unkeyable(options.hash_fn, state_embedding)
    or unkeyable(afterstate_hash_fn, afterstate_template)
  ):
    return dataclasses.replace(options, transpositions=False)
  if not options.transpositions:
    return options
  return dataclasses.replace(
    options,
    hash_fn=chance_nodes.make_key_fn(
      options.hash_fn or hashing.hash_pytree, afterstate_hash_fn or hashing.hash_pytree
    ),
  )


def _probe_functions(
  params: types.Params,
  rng_key: chex.PRNGKey,
  root: types.RootFnOutput,
  decision_recurrent_fn: DecisionRecurrentFn,
  chance_recurrent_fn: ChanceRecurrentFn,
) -> _ChanceModel:
  """Traces both functions once on the root's shapes (no computation, unlike mctx's
  dummy call) and checks what they return. Returns them with `C` and the afterstate
  shapes."""
  batch_size, num_actions = root.prior_logits.shape
  zeros = jnp.zeros((batch_size,), jnp.int32)
  decision_output, afterstate = jax.eval_shape(
    decision_recurrent_fn, params, rng_key, zeros, root.embedding
  )
  num_chance_outcomes = chance_nodes.check_decision_output(decision_output, batch_size)
  chance_output, state = jax.eval_shape(chance_recurrent_fn, params, rng_key, zeros, afterstate)
  chance_nodes.check_chance_output(chance_output, batch_size, num_actions)
  chance_nodes.check_same_structure(
    "chance_recurrent_fn's state embedding", state, root.embedding, "root.embedding", batch_size
  )
  return _ChanceModel(
    decision_recurrent_fn=decision_recurrent_fn,
    chance_recurrent_fn=chance_recurrent_fn,
    num_chance_outcomes=num_chance_outcomes,
    afterstate_template=afterstate,
  )


def _continuable(graph: Graph, width: int) -> Graph:
  """A graph to continue as the plain `Graph` the search takes; games whose root is
  a chance node (rerooted by an action only) are emptied, so they start afresh, and
  counted in `root_key_mismatches` (their root holds an afterstate, not the state
  searched)."""
  if graph.num_actions != width:
    raise ValueError(
      f"graph has {graph.num_actions} columns; this search needs max(A, C) = {width}"
    )
  if not isinstance(graph.embeddings, StochasticRecurrentState):
    raise TypeError(
      "graph must come from stochastic_muzero_policy (its embeddings are StochasticRecurrentState)"
    )
  decision_root = graph.embeddings.is_decision_node[:, ROOT_INDEX]
  chance_root = (graph.num_nodes > 0) & ~decision_root
  plain = _plain(graph)
  return plain.replace(
    num_nodes=jnp.where(chance_root, 0, plain.num_nodes),
    root_key_mismatches=plain.root_key_mismatches + chance_root.astype(jnp.int32),
    extra_data=None,
  )


def _plain(graph: Graph) -> Graph:
  """The same arrays as the plain `Graph` the search takes (not a `StochasticGraph`,
  whose summary reads `ChanceData`)."""
  return Graph(**{field.name: getattr(graph, field.name) for field in dataclasses.fields(Graph)})
