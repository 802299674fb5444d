"""Errors a user sees: each names what was wrong and where, never just a traceback.

A failure inside a worker (a load task's parse or preprocess, a device actor's compare or sink
write) also keeps the worker's own traceback, as text, so the driver can show where it broke:
``mark_failure`` attaches it (and the stage) to the exception where it is caught, attributes
travel with the exception through Ray's pickling, and ``worker_traceback`` finds them again."""
from __future__ import annotations

import re
import traceback


class PairflowError(RuntimeError):
    """A run could not complete; the message says why."""


WORKER_NOTE = "where it happened, in the worker:"


class WorkerError(PairflowError):
    """A worker failed: the message is the one line the user sees (the actor, the stage, the
    tile and its items), ``worker_traceback`` the worker's own traceback as text."""

    def __init__(self, message: str, worker_traceback: str | None = None):
        super().__init__(message)
        self.worker_traceback = worker_traceback
        if worker_traceback:  # Python prints it after the driver's traceback (REPL, pytest)
            self.add_note(f"{WORKER_NOTE}\n{worker_traceback.rstrip()}")

    def __reduce__(self):  # keep the traceback across Ray's pickling
        return (type(self), (str(self), self.worker_traceback))


class InputError(ValueError):
    """Bad input: names the file, the record (when there is one) and the problem."""

    def __init__(self, file: str, problem: str, record: str | None = None,
                 index: int | None = None):
        self.file, self.problem, self.record, self.index = file, problem, record, index
        where = file
        if record is not None:
            where += f": record {record!r}" + (f" (#{index + 1})" if index is not None else "")
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):  # keep attributes (a worker's traceback too) across Ray's pickling
        return (type(self), (self.file, self.problem, self.record, self.index), self.__dict__)


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


def mark_failure(exc: BaseException, stage: str) -> BaseException:
    """Keep on ``exc``, caught where a worker ran the failing step, that step (``stage``:
    "parse of 'a.fa'") and the traceback from there down, as text: Ray pickles an exception
    with its attributes but without its frames. The innermost mark wins. Returns ``exc``."""
    if getattr(exc, "worker_traceback", None) is None:
        try:
            exc.worker_traceback = "".join(traceback.format_exception(exc))
            exc.worker_stage = stage
        except AttributeError:  # an exception type without attributes: nothing to keep
            pass
    return exc


def worker_traceback(exc: BaseException) -> str | None:
    """The traceback of where ``exc`` first happened, as text: the innermost one a worker
    kept (``mark_failure``, ``WorkerError``), else the innermost cause's own frames (an
    exception raised in this process), else what Ray's error says of its worker."""
    inner = getattr(exc, "cause", None)
    if not isinstance(inner, BaseException) or inner is exc:
        inner = exc.__cause__
    found = worker_traceback(inner) if inner is not None and inner is not exc else None
    if found:
        return found
    kept = getattr(exc, "worker_traceback", None)
    if kept:
        return kept
    if type(exc).__name__.startswith("RayTaskError"):
        # Ray's message: a header naming the task, then the worker's traceback's lines
        lines = str(exc).split("\n", 1)
        return "Traceback (most recent call last):\n" + lines[1] if len(lines) > 1 else None
    if exc.__traceback__ is not None:
        return "".join(traceback.format_exception(exc))
    return None


def elsewhere_traceback(exc: BaseException) -> str | None:
    """A worker's traceback of ``exc`` that its own traceback does not show (it happened in
    another thread or process): what ``pairflow -v`` prints after the driver's. None for a
    failure in this process, whose own traceback already ends where it happened."""
    kept = getattr(exc, "worker_traceback", None) and worker_traceback(exc)
    if not kept:
        return None
    frames = traceback.extract_tb(exc.__traceback__)
    here = (frames[-1].filename, str(frames[-1].lineno), frames[-1].name) if frames else None
    there = re.findall(r'^  File "(.+)", line (\d+), in (\S+)$', kept, re.M)
    return None if there and there[-1] == here else kept
