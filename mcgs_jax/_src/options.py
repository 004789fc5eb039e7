"""How a search treats the graph: one frozen object built once per policy call.

Every policy takes these as flat keywords (as mctx takes its hyperparameters, typed
by `GraphKeywords`) or as one `options=GraphOptions(...)`, and builds one
`GraphOptions`; `search`, `select`, `expand`, `link` and `backup` read it. Checks
run when it is built, at trace time, and name the keyword at fault.
"""

import dataclasses
import difflib
import warnings
from collections.abc import Mapping
from typing import Any, Literal, TypedDict

import jax

from mcgs_jax._src import checks, hashing, types

# What a playout does when it reaches a child that other parents have visited more
# often than this edge (`N(child) > N(n, a)`), see `GraphOptions.stop_rule`.
StopRule = Literal["catch_up", "value_lag", "never"]
STOP_RULES: tuple[StopRule, ...] = ("catch_up", "value_lag", "never")

# Most nodes per game: a game holds up to `2 * capacity` hash slots, rounded up to a
# power of two, and a slot index is int32.
MAX_CAPACITY = 1 << 29


def _checked_bounds(value_bounds: Any) -> tuple[float, float]:
  """`value_bounds` as `(lowest, highest)` floats, or an error naming it."""
  message = (
    f"value_bounds must be None or (lowest, highest) with lowest < highest, got {value_bounds!r}"
  )
  try:
    lowest, highest = (float(bound) for bound in value_bounds)
  except (TypeError, ValueError):
    raise ValueError(message) from None
  if not lowest < highest:
    raise ValueError(message)
  return lowest, highest


@dataclasses.dataclass(frozen=True)
class GraphOptions:
  """Graph keywords shared by every policy.

  hash_fn: `embedding [B, ...] -> uint32 [B, L]`, the transposition key (None:
    `mcgs_jax.hash_pytree`, every bit of the embedding). Unused in tree mode.
  transpositions: search a graph (True) or a tree (False, classic MCTS, mctx's
    search exactly). An empty embedding (no array leaf, e.g. `()`) without a
    `hash_fn` gives the default key nothing to tell states apart by, so that search
    runs as a tree (`tree_mode_when_unkeyable`).
  stop_rule: whether a playout ends at a child visited more often than its edge
    (`N(child) > N(n, a)`: visits came through other parents).
    `"catch_up"` (KataGo's rule, "Monte-Carlo Graph Search from First
    Principles"): stop there, count the edge and back up, except with probability
    `stop_leak` (KataGo's `graphSearchCatchUpLeakProb`), when the playout continues
    through the child. `"value_lag"` (after CrazyAra, Czech et al., "Monte-Carlo
    Graph Search for AlphaZero"): stop there only when the edge's stored value
    (`Graph.edge_values`, the `Q(n, a)` that `Q(n)` currently reflects) differs from
    the live `Q(n, a) = r + discount * Q(child)` by more than `stop_epsilon`; the
    backup then recomputes `n` from the live value, which is the correction.
    `"never"`: always continue. With every rule the cycle guard and `max_depth`
    still end playouts.
  stop_leak: probability in [0, 1] that a `"catch_up"` stop is skipped (a coin per
    game per depth, from that game's selection key).
  stop_epsilon: value difference, >= 0, above which `"value_lag"` stops (CrazyAra's
    `Q_TRANSPOS_DIFF` is 0.01).
  capacity: nodes per game, root included (None: `num_simulations + 1`, or the
    capacity of a continued graph); >= 2.
  probe_window: hash slots read per lookup, >= 1.
  solver: prove exact values (the MCTS-solver): playouts stop at proven nodes
    and selection skips dominated proven edges.
  value_bounds: `(lowest, highest)` value the game allows for the player to move,
    e.g. `(-1, 1)` for a two-player zero-sum game with outcomes in [-1, 1]. With
    `solver`, an edge proven worth `highest` proves its node at once; None: a node
    is proven only when every legal edge is (single-player games with rewards).
  num_parallel: playouts per game per step, K, with virtual loss and one batched
    evaluation of the K leaves; `num_simulations` must be a multiple of K.
  fold_evaluations: when a playout's evaluation lands on a node that exists
    already (a transposition hit, or a stop at an existing child), add it to that
    node's own value as one more sample instead of dropping it: `k(n)`
    (`Graph.node_evaluations`) grows by one, `U(n)` is the mean of the `k(n)`
    evaluations, `N(n) = k(n) + sum_a N(n, a)` (a playout that ends at a node
    counts there, as in UCT) and `Q(n) = (k(n) U(n) + sum_a N(n, a) Q(n, a)) /
    N(n)`. Terminal and proven nodes are exact and take no sample. Counted in
    `Graph.folded_evaluations`. Worth it for stochastic evaluators (rollouts); a
    deterministic network repeats itself. Off: `k(n) = 1` everywhere.
  max_children: compact edges: every node keeps its `K = max_children` valid
    actions of highest prior in `K` slots (`Graph.children_actions`), and every
    edge table is `[B, N, K]` instead of `[B, N, A]`, as KataGo and CrazyAra keep
    only the children of legal moves. Valid: a positive prior (the game adapters
    give illegal actions a zero prior) and, at the root, not invalid. With `K` at
    least every node's valid count (e.g. `mcgs_jax.games.max_legal_actions`) the
    search is the dense one: the same actions and visits, values to rounding. A node
    with more valid actions keeps the `K` most likely; the others are counted in
    `Graph.dropped_actions` and never searched, at the root too (they get weight 0
    and are never played). Outputs (`action`, `action_weights`, `summary()`) stay
    `[B]` / `[B, A]`. None (default): dense edge tables, one column per action.
  proof_first: with `solver`, selection tries first the edges nearest a proof (a
    proof-number order of depth one): an unexpanded edge costs 1, an edge into an
    unproven child the child's legal edges not proven yet
    (`Graph.node_unproven_edges`, each needs at least one more playout), an edge
    into a proven child comes last (nothing is left to prove there); among the
    legal edges the solver does not exclude, only the cheapest are open to the
    selection rule, whose own score (PUCT, UCB1, Gumbel, at the root too) chooses
    among them. Proofs stay exact (it changes which edge a playout takes, never
    what is proven). Off (default): the rules alone choose. On, small games and end
    games are proven in far fewer playouts (Nim 3-4-5 in every seed by 400), but a
    root left unproven plays the move its proofs were cheapest for, not the best
    (connect-four end games lost 15-25 points of optimal moves; docs/options.md).
  """

  hash_fn: types.HashFn | None = None
  transpositions: bool = True
  stop_rule: StopRule = "never"
  stop_leak: float = 0.0
  stop_epsilon: float = 0.01
  capacity: int | None = None
  probe_window: int = hashing.DEFAULT_PROBE_WINDOW
  solver: bool = False
  value_bounds: tuple[float, float] | None = (-1.0, 1.0)
  num_parallel: int = 1
  fold_evaluations: bool = False
  max_children: int | None = None
  proof_first: bool = False

  def __post_init__(self) -> None:
    for name in ("transpositions", "solver", "proof_first", "fold_evaluations"):
      if not isinstance(getattr(self, name), bool):
        raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")
    if self.hash_fn is not None and not callable(self.hash_fn):
      raise TypeError(
        f"hash_fn must be callable (embedding -> uint32 [B, L]), got {self.hash_fn!r}"
      )
    if self.stop_rule not in STOP_RULES:
      raise ValueError(f"stop_rule must be one of {STOP_RULES}, got {self.stop_rule!r}")
    checks.check_real("stop_leak", self.stop_leak, low=0, high=1)
    checks.check_real("stop_epsilon", self.stop_epsilon, low=0)
    if self.capacity is not None:
      checks.check_int("capacity", self.capacity, minimum=2, maximum=MAX_CAPACITY)
    checks.check_int("probe_window", self.probe_window, minimum=1)
    checks.check_int("num_parallel", self.num_parallel, minimum=1)
    if self.max_children is not None:
      checks.check_int("max_children", self.max_children, minimum=1)
    if self.value_bounds is not None:
      object.__setattr__(self, "value_bounds", _checked_bounds(self.value_bounds))

  @property
  def counts_unproven_edges(self) -> bool:
    """Whether the graph keeps `Graph.node_unproven_edges` (`solver` and
    `proof_first`)."""
    return self.solver and self.proof_first

  @property
  def resolved_hash_fn(self) -> types.HashFn:
    """`hash_fn`, or the default key of every bit of the embedding."""
    return self.hash_fn or hashing.hash_pytree


# The options of a search given none (every field at its default).
DEFAULT_OPTIONS = GraphOptions()


def unkeyable(hash_fn: types.HashFn | None, embedding: Any) -> bool:
  """Whether the default key has nothing to hash: no `hash_fn` and an embedding
  without array leaves (mctx's bandit tests pass `()`). Every state would get the
  same key, so a graph could not tell states apart. A user `hash_fn` is trusted (it
  may key states from outside the embedding)."""
  return hash_fn is None and not jax.tree_util.tree_leaves(embedding)


def tree_mode_when_unkeyable(options: GraphOptions, embedding: Any) -> GraphOptions:
  """`options`, switched to tree mode (`transpositions=False`) when the states are
  `unkeyable`: as a tree the search needs no key, as in mctx."""
  if options.transpositions and unkeyable(options.hash_fn, embedding):
    return dataclasses.replace(options, transpositions=False)
  return options


class GraphKeywords(TypedDict, total=False):
  """The flat graph keywords of every policy, one per field of `GraphOptions` (see
  there), so that `**graph_options: Unpack[GraphKeywords]` gives type checkers and
  IDEs the names and types."""

  hash_fn: types.HashFn | None
  transpositions: bool
  stop_rule: StopRule
  stop_leak: float
  stop_epsilon: float
  capacity: int | None
  probe_window: int
  solver: bool
  value_bounds: tuple[float, float] | None
  num_parallel: int
  fold_evaluations: bool
  max_children: int | None
  proof_first: bool


GRAPH_KEYWORDS = tuple(field.name for field in dataclasses.fields(GraphOptions))


def resolve(caller: str, options: GraphOptions | None, keywords: Mapping[str, Any]) -> GraphOptions:
  """The `GraphOptions` of a policy call: `options` as given, or built from the flat
  graph keywords (`from_keywords`). Giving both is a TypeError that names the flat
  keywords: neither silently overrides the other."""
  if options is None:
    return from_keywords(caller, keywords)
  if not isinstance(options, GraphOptions):
    raise TypeError(
      f"{caller}: options must be a mcgs_jax.GraphOptions or None, got {type(options).__name__}"
    )
  if keywords:
    raise TypeError(
      f"{caller}: give options=GraphOptions(...) or the graph keywords, not both; got "
      f"options and {', '.join(sorted(keywords))}"
    )
  return options


def from_keywords(caller: str, keywords: Mapping[str, Any]) -> GraphOptions:
  """The `GraphOptions` of a policy's flat graph keywords.

  An unknown keyword is a TypeError that names it and lists the graph keywords (with
  a guess when it looks like a typo). `stop_at_transposition`, the keyword of
  version 0.1, still works for one release with a DeprecationWarning: True is
  `stop_rule="catch_up"` (no leak), False is `stop_rule="never"`.
  """
  keywords = dict(keywords)
  if "stop_at_transposition" in keywords:
    stop = keywords.pop("stop_at_transposition")
    warnings.warn(
      "stop_at_transposition is deprecated; use stop_rule='catch_up' (True) "
      "or stop_rule='never' (False)",
      DeprecationWarning,
      stacklevel=3,
    )
    if "stop_rule" in keywords:
      raise TypeError(f"{caller}: give stop_rule or stop_at_transposition, not both")
    keywords["stop_rule"] = "catch_up" if stop else "never"
  unknown = sorted(set(keywords) - set(GRAPH_KEYWORDS))
  if unknown:
    guess = difflib.get_close_matches(unknown[0], GRAPH_KEYWORDS, n=1)
    hint = f" (did you mean {guess[0]!r}?)" if guess else ""
    raise TypeError(
      f"{caller} got an unexpected keyword {unknown[0]!r}{hint}; its graph "
      f"keywords are {', '.join(GRAPH_KEYWORDS)}"
    )
  return GraphOptions(**keywords)
