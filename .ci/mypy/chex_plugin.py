"""mypy plugin: `@chex.dataclass` classes are dataclasses with a typed `replace`.

chex's decorator is marked `dataclass_transform`, which gives mypy the fields and
`__init__`, but chex also adds `replace(**changes)`, which no stub can express. This
plugin runs mypy's own dataclass handling for the decorator, then adds
`replace(self, *, field: type = ..., ...) -> Self` with one optional keyword per field,
so a misspelt or mistyped `graph.replace(nod_visits=...)` is an error.
"""

from collections.abc import Callable

from mypy.nodes import ARG_NAMED_OPT, Argument, Var
from mypy.plugin import ClassDefContext, Plugin
from mypy.plugins import dataclasses as dataclasses_plugin
from mypy.plugins.common import add_method_to_class
from mypy.types import AnyType, TypeOfAny
from mypy.typevars import fill_typevars

CHEX_DATACLASS = ("chex.dataclass", "chex._src.dataclass.dataclass")


def _tag(ctx: ClassDefContext) -> None:
  dataclasses_plugin.dataclass_tag_callback(ctx)


def _make(ctx: ClassDefContext) -> bool:
  if not dataclasses_plugin.dataclass_class_maker_callback(ctx):
    return False  # mypy defers the class and calls again
  info = ctx.cls.info
  attributes = info.metadata.get("dataclass", {}).get("attributes", [])
  arguments = []
  for attribute in attributes:
    name = attribute["name"]
    symbol = info.get(name)
    node = symbol.node if symbol is not None else None
    field_type = node.type if isinstance(node, Var) and node.type is not None else None
    field_type = field_type or AnyType(TypeOfAny.unannotated)
    arguments.append(Argument(Var(name, field_type), field_type, None, ARG_NAMED_OPT))
  add_method_to_class(ctx.api, ctx.cls, "replace", arguments, fill_typevars(info))
  return True


class ChexPlugin(Plugin):
  def get_class_decorator_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
    return _tag if fullname in CHEX_DATACLASS else None

  def get_class_decorator_hook_2(self, fullname: str) -> Callable[[ClassDefContext], bool] | None:
    return _make if fullname in CHEX_DATACLASS else None


def plugin(version: str) -> type:
  del version
  return ChexPlugin
