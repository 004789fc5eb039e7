"""What several test files share: the command line that runs a benchmark script, and
one simulation's selection and expansion."""

import pathlib
import sys

import jax

from mcgs_jax._src import search as search_steps

REPO = pathlib.Path(__file__).resolve().parent.parent


def benchmark_command(script, *args):
  """The command line that runs `benchmarks/<script>.py` as the module
  `benchmarks.<script>`, with `args`. The repository is put at the end of the new
  process's `sys.path`, after the installed packages, so that the installed mcgs_jax
  (the wheel `.ci/run` tests) is the one imported where there is one."""
  code = (
    f"import runpy, sys; sys.path.append({str(REPO)!r}); "
    f"runpy.run_module('benchmarks.{script}', run_name='__main__', alter_sys=True)"
  )
  return [sys.executable, "-c", code, *args]


def select_and_expand(key, graph, *, rules, recurrent_fn, max_depth, options):
  """`(graph, path, linked)`: one `select` with the `(root, interior)` selection
  `rules`, then the `expand` of its path; `linked` is the path with its leaf, ready
  for `backup`."""
  select_key, expand_key = jax.random.split(key)
  graph, path = search_steps.select(
    select_key,
    graph,
    root_action_selection_fn=rules[0],
    interior_action_selection_fn=rules[1],
    max_depth=max_depth,
    options=options,
  )
  graph, linked = search_steps.expand(
    None, expand_key, graph, path, recurrent_fn=recurrent_fn, options=options
  )
  return graph, path, linked
