"""The search engines of the apps: this library (`"mcgs"`) and DeepMind's mctx
(`"mctx"`), one entry each, so that the arena, the training loop and the command line
ask what an engine supports instead of testing its name.

  * `ENGINES`: name -> `Engine` (what it supports); `ENGINE_NAMES` their names.
  * `get_engine(name)`: the entry, or ValueError naming the known engines.
  * `Engine.capacity(num_simulations, search_capacity)`: the nodes of one search.

The search of an external engine is built by `registry.mctx_policy` (the one
adapter from this package's `RootFnOutput` and `recurrent_fn` to mctx's).
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Engine:
  """What one search engine supports.

  Attributes:
    name: the engine's name on the command line and in `Agent` / `Config`.
    external: True for another package's search (mctx), run through
      `registry.mctx_policy`; its searches are described by its name.
    keeps_graph: whether it searches a graph of its own: transpositions, reuse
      between moves, a chosen capacity, `make_room`, compact edges, the key's
      history mode. False: a tree of `num_simulations + 1` nodes from scratch at
      every move.
    solver: whether it proves exact values (MCTS-solver).
    parallel: whether it runs several playouts per game per step (`num_parallel`).
  """

  name: str
  external: bool
  keeps_graph: bool
  solver: bool
  parallel: bool

  def capacity(self, num_simulations: int, search_capacity: int) -> int:
    """Nodes per game of one search: `search_capacity` for an engine that keeps a
    graph, else its tree's `num_simulations + 1`."""
    return search_capacity if self.keeps_graph else num_simulations + 1


ENGINES: dict[str, Engine] = {
  "mcgs": Engine("mcgs", external=False, keeps_graph=True, solver=True, parallel=True),
  "mctx": Engine("mctx", external=True, keeps_graph=False, solver=False, parallel=False),
}
ENGINE_NAMES = tuple(ENGINES)


def get_engine(name: str) -> Engine:
  """`ENGINES[name]`, or ValueError naming the known engines."""
  if name not in ENGINES:
    raise ValueError(f"unknown engine {name!r}; expected one of {ENGINE_NAMES}")
  return ENGINES[name]
