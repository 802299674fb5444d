"""Named choices of one kind (plans, evictions, sinks), so config names and code cannot drift."""
from __future__ import annotations

from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """``name -> factory`` for one kind of thing; an unknown name is an error listing the
    choices, which is what a user who mistyped a config value needs to read."""

    def __init__(self, kind: str, factories: dict[str, Callable[..., T]]):
        self.kind = kind
        self.factories = dict(factories)

    def make(self, name: str, *args, **kwargs) -> T:
        factory = self.factories.get(name)
        if factory is None:
            names = [repr(n) for n in self.factories]
            choices = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1
                                  else names)
            raise ValueError(f"unknown {self.kind} {name!r}: choose {choices}")
        return factory(*args, **kwargs)
