"""The dashboard's reading layer: a run directory turned into dicts and pandas frames, read as it
is written. Pure Python and pandas (pyarrow only for trace.parquet); no Streamlit, no Ray and
nothing of the engine, written against docs/run-directory.md alone, so it reads a live run, a
finished one and a directory copied from a cluster. It holds the incremental file readers
(:mod:`.tail`), tolerant value reading (:mod:`.values`) and display formats (:mod:`.fmt`), the run
view (:mod:`.core`: :class:`RunView` and the process-wide :func:`shared_view`), the run's state and
progress (:mod:`.state`, :mod:`.snapshots`) and one reader per view of dashboard/app.py:
:mod:`.devices`, :mod:`.cache`, :mod:`.matrix`, :mod:`.timeline`, :mod:`.pipelines`, :mod:`.farm`,
:mod:`.scheduling`; ``RunView.views()`` offers only the views that apply to the run.
"""

from .core import VIEWS, RunView, shared_view
from .fmt import downsample, format_count, format_duration, format_r, format_seconds
from .state import TERMINAL_STATES, WAITING
from .tail import JsonFile, JsonlTailer
from .timeline import STAGES

__all__ = [
    "JsonlTailer",
    "JsonFile",
    "RunView",
    "shared_view",
    "VIEWS",
    "STAGES",
    "TERMINAL_STATES",
    "WAITING",
    "downsample",
    "format_r",
    "format_count",
    "format_seconds",
    "format_duration",
]
