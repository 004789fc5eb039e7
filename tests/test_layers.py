"""The package's layers: no module of `mcgs_jax` imports, directly or through others,
a module that imports it back, and `_src/rows.py` (the reductions over a node's
actions) imports nothing from the package, so the graph and everything
above it build on it.

Imports are read from the source with `ast`, those inside functions included
(deferred imports still close a circle when they run); only the body of an
`if TYPE_CHECKING:` block is left out, since it never runs. Importing `a.b.c`
counts as an import of `a.b.c` alone, not of its parent packages.
"""

import ast
import pathlib

import pytest
import source_imports

import mcgs_jax

PACKAGE_DIR = pathlib.Path(mcgs_jax.__file__).resolve().parent
LEAF = "mcgs_jax._src.rows"


def module_files():
  """`{module name: path}` of every module of the package."""
  return source_imports.module_files(PACKAGE_DIR)


def imported_modules(tree, module, modules):
  """What `tree` (the source of `module`) imports of `modules`, the body of `if
  TYPE_CHECKING:` left out (it never runs)."""
  return source_imports.imported_modules(tree, module, modules, type_checking=False)


def import_graph():
  """`{module: set of the package's modules it imports}`."""
  modules = module_files()
  return {
    module: imported_modules(ast.parse(path.read_text(), filename=str(path)), module, modules)
    for module, path in modules.items()
  }


def find_cycle(graph):
  """A list of modules `[m0, m1, ..., m0]` each importing the next, or None."""
  state = dict.fromkeys(graph, "new")
  stack = []

  def visit(module):
    state[module] = "open"
    stack.append(module)
    for target in sorted(graph[module]):
      if state[target] == "open":
        return stack[stack.index(target) :] + [target]
      if state[target] == "new":
        cycle = visit(target)
        if cycle:
          return cycle
    stack.pop()
    state[module] = "done"
    return None

  for module in sorted(graph):
    if state[module] == "new":
      cycle = visit(module)
      if cycle:
        return cycle
  return None


def test_the_import_graph_sees_the_package():
  graph = import_graph()
  assert LEAF in graph
  assert "mcgs_jax._src.compact" in graph["mcgs_jax._src.graph"]
  assert LEAF in graph["mcgs_jax._src.compact"]
  assert "mcgs_jax._src.graph" in graph["mcgs_jax._src.types"]
  # An import inside a function counts: `make_self_play` imports the game adapter.
  assert "mcgs_jax.games.adapter" in graph["mcgs_jax.testing"]


def test_no_module_imports_itself_through_others():
  cycle = find_cycle(import_graph())
  assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_leaf_imports_nothing_from_the_package():
  # Not even under `if TYPE_CHECKING:`, which the cycle check leaves out.
  tree = ast.parse(module_files()[LEAF].read_text())
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      assert all(alias.name.split(".")[0] != "mcgs_jax" for alias in node.names)
    if isinstance(node, ast.ImportFrom):
      assert node.level == 0 and node.module.split(".")[0] != "mcgs_jax"


@pytest.mark.parametrize(
  "source",
  [
    "import mcgs_jax._src.graph",
    "from mcgs_jax._src import graph",
    "from . import graph",
    "def f():\n  from mcgs_jax._src.graph import Graph",
  ],
)
def test_a_cycle_is_found_where_there_is_one(source):
  """The leaf importing `graph` back, in any of these forms, closes a cycle."""
  graph = import_graph()
  graph[LEAF] = imported_modules(ast.parse(source), LEAF, module_files())
  cycle = find_cycle(graph)
  assert cycle is not None and cycle[0] == cycle[-1]
  assert {LEAF, "mcgs_jax._src.graph"} <= set(cycle)


def test_an_import_for_type_checkers_only_is_no_cycle():
  source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n  from mcgs_jax._src import graph"
  graph = import_graph()
  graph[LEAF] = imported_modules(ast.parse(source), LEAF, module_files())
  assert graph[LEAF] == set()
  assert find_cycle(graph) is None
