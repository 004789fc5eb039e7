"""Input checks that run at trace time and name the argument at fault: the root, the
invalid actions, what `recurrent_fn` returns, and a graph a search continues or
recycles."""

from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from mcgs_jax._src import types
from mcgs_jax._src.graph import ROOT_INDEX, Graph


def _shape(x: Any) -> tuple[int, ...]:
  return tuple(np.shape(x))


def concrete(value: Any) -> np.ndarray | None:
  """`value` as a numpy array when it is known at trace time; None when it is traced
  (e.g. an argument of a jitted function), so that a check of its range is skipped."""
  if isinstance(value, jax.core.Tracer):
    return None
  try:
    return np.asarray(value)
  except (TypeError, jax.errors.ConcretizationTypeError):
    return None


def check_real(
  name: str,
  value: Any,
  *,
  low: float | None = None,
  high: float | None = None,
  low_open: bool = False,
  expected: str | None = None,
) -> Any:
  """Checks a real hyperparameter (a Python number or an array) when its value is
  known at trace time: a number in `[low, high]` (`(low, high]` with `low_open`; NaN
  and infinities are refused: no hyperparameter means anything at infinity). A
  traced value is taken as given, as mctx takes it. Returns `value`.
  """
  array = concrete(value)
  if array is None:
    return value
  if array.dtype.kind not in "biuf":
    raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
  if expected is None:
    if low is not None and high is not None:
      expected = f"in ({low}, {high}]" if low_open else f"in [{low}, {high}]"
    elif low is not None:
      expected = f"> {low}" if low_open else f">= {low}"
    elif high is not None:
      expected = f"<= {high}"
    else:
      expected = "a real number"
  ok = ~np.isnan(array.astype(np.float64))
  if low is not None:
    ok &= (array > low) if low_open else (array >= low)
  if high is not None:
    ok &= array <= high
  if not np.all(ok):
    raise ValueError(f"{name} must be {expected}, got {value!r}")
  if not np.all(np.isfinite(array.astype(np.float64))):
    raise ValueError(f"{name} must be finite, got {value!r}")
  return value


def check_int(name: str, value: Any, *, minimum: int, maximum: int | None = None) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise TypeError(f"{name} must be a Python int, got {type(value).__name__} {value!r}")
  if value < minimum:
    raise ValueError(f"{name} must be >= {minimum}, got {value}")
  if maximum is not None and value > maximum:
    raise ValueError(f"{name} must be <= {maximum}, got {value}")
  return int(value)


def check_root(root: Any) -> tuple[int, int]:
  """Checks a `RootFnOutput` and returns `(batch_size, num_actions)`."""
  for name in ("prior_logits", "value", "embedding"):
    if not hasattr(root, name):
      raise TypeError(
        f"root must be a RootFnOutput(prior_logits [B, A], value [B], embedding), "
        f"got {type(root).__name__} without {name!r}"
      )
  for name in ("prior_logits", "value"):
    array = getattr(root, name)
    if not (hasattr(array, "shape") and hasattr(array, "dtype")):
      raise TypeError(
        f"root.{name} must be an array ({'[B, A]' if name == 'prior_logits' else '[B]'} "
        f"jax or numpy), got {type(array).__name__}"
      )
  logits_shape = _shape(root.prior_logits)
  if len(logits_shape) != 2:
    raise ValueError(f"root.prior_logits must have shape [B, A], got {logits_shape}")
  batch_size, num_actions = logits_shape
  if batch_size < 1:
    raise ValueError(f"root.prior_logits must hold at least one game (B >= 1), got {logits_shape}")
  if num_actions < 1:
    raise ValueError(f"root.prior_logits must have at least one action, got {logits_shape}")
  if not jnp.issubdtype(jnp.result_type(root.prior_logits), jnp.floating):
    raise TypeError(
      f"root.prior_logits must be floating point, got {jnp.result_type(root.prior_logits)}"
    )
  if _shape(root.value) != (batch_size,):
    raise ValueError(
      f"root.value must have shape [B] = ({batch_size},) to match "
      f"root.prior_logits {logits_shape}, got {_shape(root.value)}"
    )
  if not jnp.issubdtype(jnp.result_type(root.value), jnp.floating):
    raise TypeError(f"root.value must be floating point, got {jnp.result_type(root.value)}")
  # An empty embedding (mctx's bandit tests use `()`) is allowed: see
  # `options.tree_mode_when_unkeyable`.
  for path, leaf in jax.tree_util.tree_leaves_with_path(root.embedding):
    if len(_shape(leaf)) < 1 or _shape(leaf)[0] != batch_size:
      raise ValueError(
        f"root.embedding{jax.tree_util.keystr(path)} must have leading batch "
        f"axis B = {batch_size}, got shape {_shape(leaf)}"
      )
  return batch_size, num_actions


def check_invalid_actions(invalid_actions: Any, batch_size: int, num_actions: int) -> jax.Array:
  """Returns `invalid_actions` as bool `[B, A]` (all False when None)."""
  if invalid_actions is None:
    return jnp.zeros((batch_size, num_actions), jnp.bool_)
  shape = _shape(invalid_actions)
  if len(shape) == 2 and shape[0] == batch_size and shape[1] != num_actions:
    raise ValueError(
      f"invalid_actions must have shape [B, A] = ({batch_size}, {num_actions}), got "
      f"{shape}: its A = {shape[1]} differs from root.prior_logits's A = {num_actions} "
      f"(root.prior_logits has shape ({batch_size}, {num_actions}); both must be [B, A] "
      "with the same A)"
    )
  if shape != (batch_size, num_actions):
    raise ValueError(
      f"invalid_actions must have shape [B, A] = ({batch_size}, {num_actions}), "
      f"got {_shape(invalid_actions)}"
    )
  return jnp.asarray(invalid_actions).astype(jnp.bool_)


def check_callable(name: str, fn: Any, signature: str) -> Any:
  """TypeError naming `name` unless `fn` is callable."""
  if not callable(fn):
    raise TypeError(f"{name} must be callable as {signature}, got {fn!r}")
  return fn


def unpack_recurrent_result(result: Any, name: str = "recurrent_fn") -> tuple[Any, Any]:
  """`(output, embedding)` from what `recurrent_fn` returned; a TypeError naming it
  when that is not a pair whose first element has the fields of `RecurrentFnOutput`."""
  if not isinstance(result, (tuple, list)) or len(result) != 2:
    what = (
      f"a {type(result).__name__} of {len(result)}"
      if isinstance(result, (tuple, list))
      else (f"one {type(result).__name__}")
    )
    raise TypeError(f"{name} must return a pair (RecurrentFnOutput, embedding), got {what}")
  output, embedding = result
  missing = [
    field for field in ("reward", "discount", "prior_logits", "value") if not hasattr(output, field)
  ]
  if missing:
    raise TypeError(
      f"{name} must return a pair (RecurrentFnOutput, embedding); the first element, "
      f"a {type(output).__name__}, has no {missing[0]!r}"
    )
  return output, embedding


def _dtype(x: Any) -> np.dtype:
  return np.dtype(jnp.asarray(x).dtype)


def check_recurrent_output(
  output: Any, new_embedding: Any, node_embedding: Any, batch_size: int, num_actions: int
) -> None:
  """Checks what `recurrent_fn` returned against the root's shapes."""
  for name, expected in (
    ("reward", (batch_size,)),
    ("discount", (batch_size,)),
    ("prior_logits", (batch_size, num_actions)),
    ("value", (batch_size,)),
  ):
    got = _shape(getattr(output, name))
    if got != expected:
      raise ValueError(f"recurrent_fn returned {name} of shape {got}; expected {expected}")
  # jaxlib ships no type stub for PyTreeDef, so mypy cannot compare two of them.
  expected_struct: Any = jax.tree_util.tree_structure(node_embedding)
  if jax.tree_util.tree_structure(new_embedding) != expected_struct:
    raise ValueError(
      "recurrent_fn returned an embedding whose pytree structure differs "
      f"from root.embedding: {jax.tree_util.tree_structure(new_embedding)} vs "
      f"{expected_struct}"
    )
  for (path, new), old in zip(
    jax.tree_util.tree_leaves_with_path(new_embedding),
    jax.tree_util.tree_leaves(node_embedding),
    strict=True,
  ):
    if _shape(new) != _shape(old):
      raise ValueError(
        f"recurrent_fn returned embedding{jax.tree_util.keystr(path)} of shape "
        f"{_shape(new)}; root.embedding has {_shape(old)}"
      )
    if _dtype(new) != _dtype(old):
      # Storing it would cast it silently (1.5 stored in an int32 leaf is 1).
      raise TypeError(
        f"recurrent_fn returned embedding{jax.tree_util.keystr(path)} of dtype "
        f"{_dtype(new)}; root.embedding{jax.tree_util.keystr(path)} is {_dtype(old)} "
        "(a leaf must keep its dtype)"
      )


def check_key(key: Any, batch_size: int, name: str = "hash_fn") -> jax.Array:
  """Checks what a key function (`name`) returned: uint32 `[B, L]` with L >= 1."""
  if not hasattr(key, "dtype"):  # a list or a scalar: jax would say only "dtype"
    raise TypeError(f"{name} must return a uint32 array [B, L], got a {type(key).__name__}")
  shape = _shape(key)
  if len(shape) != 2 or shape[0] != batch_size or shape[1] < 1:
    raise ValueError(
      f"{name} must return uint32 [B, L] with B = {batch_size} and L >= 1, got shape {shape}"
    )
  if jnp.result_type(key) != jnp.uint32:
    raise TypeError(f"{name} must return uint32 [B, L], got dtype {jnp.result_type(key)}")
  return key


def check_inputs(
  root: types.RootFnOutput,
  invalid_actions: chex.Array | None,
  graph: Graph | None,
  recycle: Graph | None,
) -> tuple[types.RootFnOutput, chex.Array]:
  """Checks, at trace time, the root, `invalid_actions`, and that `graph` and
  `recycle` are graphs or None and not both given; returns the root with its prior
  logits as an array and `invalid_actions` as bool `[B, A]` (all False when None).

  What depends on the search's settings (capacity, the continued graph's shapes) is
  checked by `initial_graph`.
  """
  for name, value in (("graph", graph), ("recycle", recycle)):
    if value is not None and not isinstance(value, Graph):
      raise TypeError(
        f"{name} must be a mcgs_jax.Graph (a search_graph, or what reroot returns) "
        f"or None, got {type(value).__name__}"
      )
    if value is not None and isinstance(value.node_visits, jax.ShapeDtypeStruct):
      raise TypeError(
        f"{name} holds shapes only (jax.eval_shape); pass mcgs_jax.empty_like(shapes) "
        f"for a graph in which every game is empty"
      )
  if graph is not None and recycle is not None:
    raise ValueError("pass graph (to continue it) or recycle (to reuse its arrays), not both")
  batch_size, num_actions = check_root(root)
  return (
    root.replace(prior_logits=jnp.asarray(root.prior_logits)),
    check_invalid_actions(invalid_actions, batch_size, num_actions),
  )


def check_continued_graph(
  graph: Graph,
  capacity: int | None,
  batch_size: int,
  num_actions: int,
  transpositions: bool,
  name: str,
) -> int:
  """Checks that `graph` (the argument `name`, `graph` or `recycle`) fits a search
  with these arguments; returns its capacity."""
  if (graph.batch_size, graph.num_actions) != (batch_size, num_actions):
    raise ValueError(
      f"{name} holds B = {graph.batch_size} games of A = {graph.num_actions} "
      f"actions; root has B = {batch_size}, A = {num_actions}"
    )
  if capacity is not None and capacity != graph.capacity:
    raise ValueError(
      f"capacity = {capacity} differs from the capacity of {name} "
      f"({graph.capacity}); a search on {name} keeps its capacity"
    )
  if transpositions != (graph.hash_slots.shape[1] > 0):
    raise ValueError(
      f"transpositions = {transpositions}, but {name} was built with "
      f"transpositions = {not transpositions}"
    )
  return graph.capacity


def check_root_key(graph: Graph, root_key: chex.Array) -> None:
  """ValueError naming `graph` when a game whose graph is kept (`num_nodes > 0`)
  stores another key at its root than the root being searched has: the graph belongs
  to another position (e.g. rerooted by a move and continued from the position
  before it). Checked where the values are known (outside `jit`); under `jit`
  `_continue` starts such a game afresh and counts it in `root_key_mismatches`."""
  values = (graph.node_keys, graph.num_nodes, root_key)
  if any(isinstance(value, jax.core.Tracer) for value in values):
    return
  stored = np.asarray(graph.node_keys[:, ROOT_INDEX])  # same width: `check_tables` ran
  kept = np.asarray(graph.num_nodes) > 0
  wrong = np.flatnonzero(kept & np.any(stored != np.asarray(root_key), axis=-1))
  if wrong.size:
    raise ValueError(
      f"graph: game {int(wrong[0])}'s root holds another state's key than the root "
      f"searched ({wrong.size} of {kept.size} games): the graph belongs to another "
      "position (rerooted by another move, or not rerooted); reroot it by the move "
      "played, or pass an empty graph"
    )


def check_tables(name: str, given: Graph, expected: Graph) -> None:
  """ValueError naming `name` (`graph` or `recycle`) and the first table of `given`
  whose shape or dtype differs from those of the graph this search builds
  (`expected`, from `jax.eval_shape`): another embedding structure, key width, leaf
  dtype or number of actions, or a graph of the other policy kind (stochastic or
  not), is refused at trace time instead of failing later in a broadcast."""
  found = jax.tree_util.tree_leaves_with_path(given.replace(extra_data=None))
  wanted = jax.tree_util.tree_leaves_with_path(expected.replace(extra_data=None))
  if type(given) is not type(expected) or [path for path, _ in found] != [
    path for path, _ in wanted
  ]:
    raise ValueError(
      f"{name} holds other tables than this search builds (a different embedding "
      "structure, or a graph of the other policy kind?); pass a graph from a search "
      "with the same root, game and options"
    )
  for (path, old), (_, new) in zip(found, wanted, strict=True):
    if (old.shape, old.dtype) != (new.shape, new.dtype):
      raise ValueError(
        f"{name}{jax.tree_util.keystr(path)} has shape {old.shape} and dtype "
        f"{old.dtype}; this search needs {new.shape} {new.dtype} (same B, capacity, "
        f"A, transpositions, key width and embedding)"
      )


def check_puct(*, pb_c_init: Any, pb_c_base: Any, temperature: Any, qtransform: Any) -> None:
  """Range checks of PUCT's constants and the temperature, run when their values are
  known at trace time (traced values, e.g. arguments of a jitted function, are taken
  as given, as in mctx), and that `qtransform` is callable."""
  check_callable("qtransform", qtransform, "(graph, node) -> [A] scores")
  check_real("pb_c_init", pb_c_init, expected="a real number")
  check_real("pb_c_base", pb_c_base, low=0, low_open=True)
  check_real("temperature", temperature, low=0)
