"""What several test files share: running a benchmark script from the checkout,
loading one as a module, and one simulation's selection and expansion."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import jax

from mcgs_jax._src import search as search_steps

REPO = pathlib.Path(__file__).resolve().parent.parent


def run_in_checkout(argv, **kwargs):
  """`subprocess.run` of `python ARGV...` from the repository's root, as the benchmarks
  README runs its suite (`python -m benchmarks CASE`): Python puts the root first on
  the new process's path, so the scripts and the mcgs_jax beside them are imported from
  the checkout. `kwargs` go to `subprocess.run` (text output, captured, by default)."""
  kwargs = dict(capture_output=True, text=True) | kwargs
  return subprocess.run([sys.executable, *argv], cwd=REPO, **kwargs)


# The suite's case and part of each script the tests run (`python -m benchmarks CASE
# --part PART`, benchmarks/__main__.py): this process may not import `benchmarks`.
SUITE_PARTS = {
  "jumanji_a2c": ("planning", "jumanji_a2c"),
  "tpu_compile": ("scale", "tpu_compile"),
  "training_race": ("training", "training_race"),
}


def run_benchmark(script, *args, out=os.devnull, **kwargs):
  """`python -m benchmarks CASE --part SCRIPT ARGS... --out OUT` from the repository's
  root (`run_in_checkout`): the suite's runner on the part that `benchmarks/SCRIPT.py`
  holds, its JSON record written to `out` (by default nowhere)."""
  case, part = SUITE_PARTS[script]
  return run_in_checkout(
    ["-m", "benchmarks", case, "--part", part, "--out", str(out), *args], **kwargs
  )


def load_benchmark(script):
  """`benchmarks/SCRIPT.py` (a part of the suite) loaded as a module from its file (no
  `benchmarks` package on the path: the tests also run against an installed wheel, so
  such a module imports other benchmark modules only inside its functions)."""
  spec = importlib.util.spec_from_file_location(
    f"{script}_benchmark", REPO / "benchmarks" / f"{script}.py"
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


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
