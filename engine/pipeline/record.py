"""Everything a pipeline run writes into its run directory, and its progress line.

One small class, built on the shared ``RunRecorder`` and ``Progress`` of ``engine.run``, so that
the run's lifecycle never names a file. The file names and formats are the run-directory format the dashboard reads (docs/run-directory.md): config.yaml,
meta.json, status.json, metrics.jsonl (heartbeats), pipeline.jsonl (one line per re-plan),
summary.json and result/cutflow.{parquet,json}.
"""
from __future__ import annotations

import os
import time

import numpy as np

from ..run.progress import Progress
from ..run.rundir import (METRICS, PIPELINE, RESULT, JsonlWriter, RunDir, RunRecorder,
                          new_run_dir, write_json)

#: a heartbeat line at most this often (seconds), unless forced
HEARTBEAT_S = 0.5


class PipelineRecorder:
    """The pipeline's side of the shared ``RunRecorder`` (config, meta, status, summary) plus
    what only pipelines write: heartbeat snapshots, one line per re-plan and the cutflow. The
    directory (``run_dir``, or a new one under ``runs_root/name``) is created at once, so that
    a run failing before it starts still records why."""

    def __init__(self, run_dir: str | None, runs_root: str, name: str, progress: bool):
        rundir = RunDir(run_dir).create() if run_dir else new_run_dir(runs_root, name)
        self.recorder = RunRecorder(rundir)
        self.rundir = rundir
        self.progress = progress
        self.bar: Progress | None = None
        self.metrics_w = self.plan_w = None

    @property
    def path(self) -> str:
        return self.rundir.path

    @property
    def result_dir(self) -> str:
        return self.rundir.result_dir

    def start(self, config: dict, meta: dict) -> None:
        """config.yaml, meta.json, status "starting"."""
        self.recorder.write_config(jsonable(config))
        self.recorder.write_meta(meta)
        self.recorder.starting()
        self.metrics_w = JsonlWriter(self.rundir.file(METRICS))
        self.plan_w = JsonlWriter(self.rundir.file(PIPELINE))
        self._last_beat = 0.0

    def running(self) -> None:
        self.recorder.running()

    def plan(self, line: dict) -> None:
        self.plan_w.write([line])

    def heartbeat(self, snapshot, force: bool = False) -> None:
        """``snapshot(now) -> dict`` (built only when a line is due): appended to metrics.jsonl,
        shown by the progress display (unit: batches), and the status kept alive."""
        now = time.time()
        if not force and now - self._last_beat < HEARTBEAT_S:
            return
        self._last_beat = now
        snap = snapshot(now)
        self.metrics_w.write([snap])
        if self.progress:
            if self.bar is None:
                self.bar = Progress(snap["batches_total"], unit="batches",
                                    figures={"selected": ",.0f"})
            self.bar.update(snap["batches_done"], selected=float(snap["records_selected"]))
        self.recorder.heartbeat()

    def cutflow(self, frame, rows: list, totals: dict) -> str:
        """result/cutflow.parquet (renamed into place) and cutflow.json; returns the Parquet."""
        final = self.rundir.file(f"{RESULT}/cutflow.parquet")
        frame.to_parquet(final + ".tmp", index=False)
        os.replace(final + ".tmp", final)
        write_json(self.rundir.file(f"{RESULT}/cutflow.json"), {"ops": rows, "totals": totals})
        return final

    def _close(self) -> None:
        for w in (self.metrics_w, self.plan_w):
            if w is not None:
                w.close()
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def finish(self, summary: dict) -> None:
        if self.bar is not None:
            self.bar.update(self.bar.total, final=True,
                            selected=float(summary.get("records_selected", 0)))
        self._close()
        self.recorder.write_summary(summary)
        self.recorder.finished()

    def fail(self, exc: BaseException) -> None:
        """Best effort: the run's own error is what the caller must see."""
        try:
            if isinstance(exc, KeyboardInterrupt):
                self.recorder.interrupted()
            else:
                self.recorder.failed(str(exc))
            self._close()
        except Exception:
            pass


def jsonable(obj):
    """Plain JSON/YAML values (numpy scalars unwrapped, anything else by its str)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    return str(obj)
