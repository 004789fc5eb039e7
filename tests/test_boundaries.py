"""The boundaries between the package's modules (issue 61), read from the source with
`ast`:

  (a) a private name (`_name`, not a dunder) stays in its module: no other module
      imports it (`from X import _name`) or reads it off the module
      (`module._name`); `self._x` and the like are the object's business;
  (b) the command line is the top layer: no module outside `mcgs_jax.apps.cli`
      (and `mcgs_jax_cli`, the entry point) imports it, so that the library (the
      training loop, the arena, the benchmark, the games) runs without it; only a
      `__main__` (`python -m ...`) and `ENTRY_POINTS` call a command;
  (c) every subcommand of `mcgs-jax` is one module of `mcgs_jax.apps.cli`,
      `COMMAND_command.py`, that has its parser and runs it (`build_parser`, `main`;
      the arena's parser is `arena_parser`'s), and no module elsewhere builds a
      parser;
  (d) no two modules share a file stem, nor one with a package of the engine
      (`mcgs_jax/_src/search`, ...), so that a name in a traceback or an import
      says which.

Each is checked on `SCANNED_ROOTS`: the engine, the apps, the games, the entry
points and the benchmark scripts.
"""

import ast
import pathlib

import pytest
import source_imports

import mcgs_jax

PACKAGE_DIR = pathlib.Path(mcgs_jax.__file__).resolve().parent
REPO = PACKAGE_DIR.parent
# The checkout these tests are in: the benchmark scripts are not installed.
CHECKOUT = pathlib.Path(__file__).resolve().parents[1]
# The modules checked, as paths from the repository's root (`*.py`: the files of a
# folder alone, else a folder and everything under it).
SCANNED_ROOTS = (
  "mcgs_jax/_src",
  "mcgs_jax/apps",
  "mcgs_jax/games",
  "mcgs_jax/*.py",
  "mcgs_jax_cli",
  "benchmarks",
)
CLI = "mcgs_jax.apps.cli"
# The packages that kept their command's names (`main`, `build_parser`, ...) in their
# `__all__` as lazy exports (a name, no import), for the scripts that use them there.
LAZY_COMMAND_EXPORTS = {
  "mcgs_jax.apps.benchmark": {"mcgs_jax.apps.cli.bench_command"},
  "mcgs_jax.apps.train": {"mcgs_jax.apps.cli.train_command"},
}
# The command entries besides the `__main__`s: `python -m mcgs_jax.train`, deprecated.
ENTRY_POINTS = ("mcgs_jax.train",)
SUBCOMMANDS = ("arena", "bench", "evaluate", "play", "search", "train")
# The engine's packages: a module may not take one of their names either.
ENGINE_STEMS = frozenset(
  path.name for path in (PACKAGE_DIR / "_src").iterdir() if (path / "__init__.py").is_file()
)
SHARED_STEMS = ("__init__", "__main__")


def module_files(repo=REPO):
  """`{module name: path}` of every module of `mcgs_jax`, `mcgs_jax_cli` and the
  checkout's `benchmarks`."""
  return source_imports.module_files(
    repo / "mcgs_jax", repo / "mcgs_jax_cli", CHECKOUT / "benchmarks"
  )


def scanned_modules(repo=REPO):
  """`{module name: path}` of the modules under `SCANNED_ROOTS`."""
  modules = module_files(repo)
  scanned = {}
  for root in SCANNED_ROOTS:
    base = CHECKOUT if root == "benchmarks" else repo
    folder, _, pattern = root.partition("*")
    paths = (base / folder).glob("*" + pattern) if pattern else (base / root).rglob("*.py")
    wanted = {path.resolve() for path in paths}
    scanned.update({name: path for name, path in modules.items() if path.resolve() in wanted})
  return scanned


def is_private(name: str) -> bool:
  """`_name`, not a dunder."""
  return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def imported_modules(tree, module: str, modules) -> set[str]:
  """What `tree` (the source of `module`) imports of `modules`, those under `if
  TYPE_CHECKING:` too (a type-only import of the command line still ties to it)."""
  return source_imports.imported_modules(tree, module, modules, type_checking=True)


def module_aliases(tree, module: str, modules) -> dict[str, str]:
  """`{local name: package module}` of the names `tree`'s imports bind to a module."""
  aliases = {}
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        name = alias.name if alias.asname else alias.name.split(".")[0]
        aliases[alias.asname or name] = name
    elif isinstance(node, ast.ImportFrom):
      source = source_imports.import_source(node, module, modules)
      for alias in node.names:
        if f"{source}.{alias.name}" in modules:
          aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
  return {name: target for name, target in aliases.items() if target in modules}


def dotted_module(node, aliases) -> str | None:
  """The module a `Name` or `Name.attr...` expression names through `aliases`, else None."""
  if isinstance(node, ast.Name):
    return aliases.get(node.id)
  if isinstance(node, ast.Attribute):
    owner = dotted_module(node.value, aliases)
    return f"{owner}.{node.attr}" if owner else None
  return None


def private_uses(source: str, module: str, modules) -> list[str]:
  """`module:line name` of every private name of another package module that
  `source` (of `module`) imports or reads off that module."""
  tree = ast.parse(source)
  aliases = module_aliases(tree, module, modules)
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom):
      owner = source_imports.import_source(node, module, modules)
      names = [alias.name for alias in node.names if f"{owner}.{alias.name}" not in modules]
    elif isinstance(node, ast.Attribute):
      owner, names = dotted_module(node.value, aliases), [node.attr]
    else:
      continue
    if owner in modules and owner != module:
      found += [f"{module}:{node.lineno} {owner}.{name}" for name in names if is_private(name)]
  return found


def library_uses_of_the_cli(source: str, module: str, modules) -> list[str]:
  """The command-line modules that `source` (of `module`) imports, and those it names
  in a string (a lazy export) unless `LAZY_COMMAND_EXPORTS` allows it."""
  tree = ast.parse(source)
  in_cli = lambda name: name == CLI or name.startswith(CLI + ".")
  found = sorted(name for name in imported_modules(tree, module, modules) if in_cli(name))
  allowed = LAZY_COMMAND_EXPORTS.get(module, set())
  for node in ast.walk(tree):
    named = node.value if isinstance(node, ast.Constant) else None
    if isinstance(named, str) and named in modules and in_cli(named) and named not in allowed:
      found.append(f"{named} (named)")
  return found


def is_library(module: str) -> bool:
  """Outside the command line, its entry points (`mcgs_jax_cli`, `ENTRY_POINTS`),
  the `__main__`s and the benchmark scripts (which run the commands, as users do)."""
  return not (
    module == CLI
    or module.startswith(CLI + ".")
    or module.split(".")[0] in ("mcgs_jax_cli", "benchmarks")
    or module in ENTRY_POINTS
    or module.endswith(".__main__")
  )


def top_level_names(tree) -> set[str]:
  """The names `tree` defines or imports at its top level."""
  names = set()
  for node in tree.body:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
      names.add(node.name)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
  return names


def parsers_built(source: str) -> list[int]:
  """The lines of `source` that build an argument parser (`...ArgumentParser(...)`,
  `OneLineErrorParser(...)`)."""
  lines = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Call):
      name = getattr(node.func, "id", getattr(node.func, "attr", ""))
      if name in ("ArgumentParser", "OneLineErrorParser"):
        lines.append(node.lineno)
  return lines


def shown(path: pathlib.Path) -> str:
  """`path` from the root of the checkout, or of the installed package's folder."""
  base = CHECKOUT if path.resolve().is_relative_to(CHECKOUT) else REPO
  return str(path.resolve().relative_to(base))


def shared_stems(paths, engine_stems=ENGINE_STEMS) -> dict[str, list[str]]:
  """`{stem: files}` of the file stems that two of `paths` share, or one shares with
  the engine (`engine_stems`); `__init__` and `__main__` left out."""
  by_stem: dict[str, list[str]] = {}
  for path in paths:
    if path.stem not in SHARED_STEMS:
      by_stem.setdefault(path.stem, []).append(shown(path))
  return {
    stem: files for stem, files in sorted(by_stem.items()) if len(files) > 1 or stem in engine_stems
  }


def test_the_scan_sees_the_modules():
  scanned = scanned_modules()
  assert {"mcgs_jax.apps.arena.match", "mcgs_jax.games.adapter", "mcgs_jax.testing"} <= set(scanned)
  assert {"mcgs_jax_cli", "mcgs_jax.train", f"{CLI}.command_line"} <= set(scanned)
  assert {"mcgs_jax._src.search.descent", "mcgs_jax._src.rows"} <= set(scanned)
  assert {"search", "gumbel", "stochastic"} <= ENGINE_STEMS


def test_no_module_uses_a_private_name_of_another():
  modules = module_files()
  found = [
    use
    for module, path in scanned_modules().items()
    for use in private_uses(path.read_text(), module, modules)
  ]
  assert found == []


def test_the_tests_use_public_names():
  """Tests call the package as users do: no private name of a module."""
  modules = module_files()
  found = [
    use
    for path in sorted((CHECKOUT / "tests").glob("*.py"))
    for use in private_uses(path.read_text(), f"tests.{path.stem}", modules)
  ]
  assert found == []


@pytest.mark.parametrize(
  "source",
  [
    "from mcgs_jax.apps.partial import _private",
    "from ..partial import _private",
    "from mcgs_jax.apps import partial\npartial._private()",
    "from mcgs_jax.apps import partial as p\ndef f():\n  return p._private",
    "import mcgs_jax.apps.partial\nmcgs_jax.apps.partial._private",
    "import mcgs_jax as mg\nmg.apps.partial._private",
  ],
)
def test_a_private_use_is_found(source):
  found = private_uses(source, "mcgs_jax.apps.arena.match", module_files())
  assert found and found[0].endswith("mcgs_jax.apps.partial._private")


@pytest.mark.parametrize(
  "source",
  [
    "from mcgs_jax.apps.partial import __doc__, public\nself._private\nclass A:\n  _x = 1",
    "from mcgs_jax import _src\nfrom mcgs_jax._src import lazy\nlazy.lazy_exports",
    "import numpy as np\nnp._private",
  ],
)
def test_dunders_objects_and_private_packages_are_no_private_use(source):
  assert private_uses(source, "mcgs_jax.apps.arena.match", module_files()) == []


def test_no_library_module_imports_the_command_line():
  modules = module_files()
  found = {
    module: uses
    for module, path in scanned_modules().items()
    if is_library(module)
    for uses in [library_uses_of_the_cli(path.read_text(), module, modules)]
    if uses
  }
  assert found == {}


@pytest.mark.parametrize(
  "source",
  [
    "from mcgs_jax.apps.cli.args import MAX_SEED",
    "from mcgs_jax.apps import cli",
    "def f():\n  import mcgs_jax.apps.cli.args",
    "from ..cli import args",
    "EXPORTS = {'main': 'mcgs_jax.apps.cli.arena_command'}",
  ],
)
def test_a_library_import_of_the_command_line_is_found(source):
  assert library_uses_of_the_cli(source, "mcgs_jax.apps.train.loop", module_files())
  assert is_library("mcgs_jax.apps.train.loop")
  assert not is_library(f"{CLI}.args") and not is_library("mcgs_jax.apps.train.__main__")


def test_every_subcommand_is_a_module_of_the_command_line():
  from mcgs_jax.apps.cli import command_line

  assert set(command_line.COMMANDS) == set(SUBCOMMANDS)
  cli_dir = PACKAGE_DIR / "apps" / "cli"
  for command in SUBCOMMANDS:
    tree = ast.parse((cli_dir / f"{command}_command.py").read_text())
    assert {"build_parser", "main"} <= top_level_names(tree), command
  elsewhere = {
    module: lines
    for module, path in scanned_modules().items()
    if is_library(module)
    for lines in [parsers_built(path.read_text())]
    if lines
  }
  assert elsewhere == {}


def test_a_parser_built_is_found():
  source = "import argparse\nparser = argparse.ArgumentParser()\nOneLineErrorParser(prog='x')"
  assert parsers_built(source) == [2, 3]


def test_no_two_modules_share_a_stem():
  assert shared_stems(scanned_modules().values()) == {}


def test_a_shared_stem_is_found():
  paths = [PACKAGE_DIR / "apps" / "memory.py", PACKAGE_DIR / "apps" / "arena" / "memory.py"]
  assert list(shared_stems(paths)) == ["memory"]
  assert list(shared_stems([PACKAGE_DIR / "apps" / "cli" / "search.py"])) == ["search"]
  assert shared_stems([PACKAGE_DIR / "apps" / "__init__.py", PACKAGE_DIR / "__init__.py"]) == {}
