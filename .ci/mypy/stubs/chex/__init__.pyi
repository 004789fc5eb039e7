# Type stub for the parts of chex that mcgs_jax uses (chex ships no py.typed, so mypy
# would otherwise see it as Any and not know that `chex.dataclass` makes dataclasses).
# Arrays stay `Any`: chex.Array is a union with numpy scalars, which is not indexable.
# `.replace(...)` is added to every `@chex.dataclass` class by .ci/mypy/chex_plugin.py.
from collections.abc import Callable
from typing import Any, TypeVar, overload

from typing_extensions import dataclass_transform

_T = TypeVar("_T")

Array = Any
ArrayNumpy = Any
ArrayTree = Any
Numeric = Any
PRNGKey = Any
Scalar = Any
Shape = Any

@overload
@dataclass_transform()
def dataclass(cls: type[_T], /) -> type[_T]: ...
@overload
@dataclass_transform()
def dataclass(
  *,
  init: bool = ...,
  repr: bool = ...,
  eq: bool = ...,
  order: bool = ...,
  unsafe_hash: bool = ...,
  frozen: bool = ...,
  kw_only: bool = ...,
  mappable_dataclass: bool = ...,
) -> Callable[[type[_T]], type[_T]]: ...
def __getattr__(name: str) -> Any: ...
