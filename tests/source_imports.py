"""The package's modules and what each imports, read from the source with `ast`
(tests/test_layers.py and tests/test_boundaries.py)."""

import ast
import pathlib


def module_files(*packages: pathlib.Path) -> dict[str, pathlib.Path]:
  """`{module name: path}` of every module under each package folder, named from the
  folder's own name (`.../mcgs_jax/apps/cli/args.py`: `mcgs_jax.apps.cli.args`)."""
  modules = {}
  for package in packages:
    for path in sorted(package.rglob("*.py")):
      parts = list(path.relative_to(package.parent).with_suffix("").parts)
      if parts[-1] == "__init__":
        parts.pop()
      modules[".".join(parts)] = path
  return modules


def is_type_checking(test) -> bool:
  """`TYPE_CHECKING` or `typing.TYPE_CHECKING` (any module's attribute of that name)."""
  if isinstance(test, ast.Name):
    return test.id == "TYPE_CHECKING"
  return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def import_source(node: ast.ImportFrom, module: str, modules) -> str:
  """The module `node` (`from X import ...`) imports from, relative imports resolved."""
  if not node.level:
    return node.module or ""
  package = module.split(".")
  if modules.get(module, pathlib.Path()).name != "__init__.py":
    package.pop()
  package = package[: len(package) - node.level + 1]
  return ".".join(package + ([node.module] if node.module else []))


def imported_modules(tree, module: str, modules, *, type_checking: bool) -> set[str]:
  """The modules of `modules` that `tree` (the source of `module`) imports: `from X
  import y` imports `X.y` when that is a module, else `X`; imports inside functions
  count, and those under `if TYPE_CHECKING:` only when `type_checking`."""
  imported = set()

  def visit(node):
    if not type_checking and isinstance(node, ast.If) and is_type_checking(node.test):
      for child in node.orelse:
        visit(child)
      return
    if isinstance(node, ast.Import):
      imported.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      source = import_source(node, module, modules)
      for alias in node.names:
        submodule = f"{source}.{alias.name}"
        imported.add(submodule if submodule in modules else source)
    for child in ast.iter_child_nodes(node):
      visit(child)

  visit(tree)
  return {name for name in imported if name in modules and name != module}
