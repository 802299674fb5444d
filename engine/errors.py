"""Errors a user sees: each names what was wrong and where, never just a traceback."""
from __future__ import annotations


class PairflowError(RuntimeError):
    """A run could not complete; the message says why."""


class InputError(ValueError):
    """Bad input: names the file, the record (when there is one) and the problem."""

    def __init__(self, file: str, problem: str, record: str | None = None,
                 index: int | None = None):
        self.file, self.problem, self.record, self.index = file, problem, record, index
        where = file
        if record is not None:
            where += f": record {record!r}" + (f" (#{index + 1})" if index is not None else "")
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):  # keep attributes across Ray's pickling
        return (type(self), (self.file, self.problem, self.record, self.index))


def root_cause(exc: BaseException) -> BaseException:
    """The user's exception inside Ray's wrappers (RayTaskError/RayActorError chains)."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        cause = getattr(exc, "cause", None)
        if isinstance(cause, BaseException):
            exc = cause
            continue
        break
    return exc
