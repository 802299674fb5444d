"""Everything a pipeline run writes into its run directory, and its progress line.

One small class, so that the run's lifecycle never names a file and the whole of it can move to
the shared run recorder and progress display of ``engine.run`` in one place. The file names and
formats are the run-directory format the dashboard reads (docs/run-directory.md): config.yaml,
meta.json, status.json, metrics.jsonl (heartbeats), pipeline.jsonl (one line per re-plan),
summary.json and result/cutflow.{parquet,json}.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from ..run.rundir import JsonlWriter, RunDir, dumps, new_run_dir, write_json, write_text

#: a heartbeat line at most this often (seconds), unless forced
HEARTBEAT_S = 0.5
#: the progress line on stderr at most this often (seconds)
PROGRESS_S = 5.0
#: status.json's "updated" refreshed at most this often (seconds): a watcher tells a live run
#: from a dead one by it
STATUS_S = 2.0


class PipelineRecorder:
    """Creates the run directory (``run_dir``, or a new one under ``runs_root/name``) at once,
    so that a run failing before it starts still records why."""

    def __init__(self, run_dir: str | None, runs_root: str, name: str, progress: bool):
        self.rundir = RunDir(run_dir).create() if run_dir else new_run_dir(runs_root, name)
        self.progress = progress
        self.metrics_w = self.plan_w = None

    @property
    def path(self) -> str:
        return self.rundir.path

    @property
    def result_dir(self) -> str:
        return self.rundir.result_dir

    def start(self, config: dict, meta: dict) -> None:
        """config.yaml (YAML when omegaconf can render it), meta.json, status "starting"."""
        try:
            from omegaconf import OmegaConf
            text = OmegaConf.to_yaml(OmegaConf.create(jsonable(config)))
        except Exception:
            text = dumps(config)
        write_text(self.rundir.file("config.yaml"), text)
        write_json(self.rundir.file("meta.json"), meta)
        self.rundir.set_status("starting")
        self.metrics_w = JsonlWriter(self.rundir.file("metrics.jsonl"))
        self.plan_w = JsonlWriter(self.rundir.file("pipeline.jsonl"))
        self._last_beat = 0.0
        self._last_line = self._last_status = time.time()

    def running(self) -> None:
        self.rundir.set_status("running")

    def plan(self, line: dict) -> None:
        self.plan_w.write([line])

    def heartbeat(self, snapshot, force: bool = False) -> None:
        """``snapshot(now) -> dict`` (built only when a line is due): appended to metrics.jsonl,
        shown as the progress line, and the status refreshed."""
        now = time.time()
        if not force and now - self._last_beat < HEARTBEAT_S:
            return
        self._last_beat = now
        snap = snapshot(now)
        self.metrics_w.write([snap])
        if self.progress and (force or now - self._last_line > PROGRESS_S):
            self._last_line = now
            print(f"[pairflow] batches {snap['batches_done']}/{snap['batches_total']}  records "
                  f"{snap['records_in']}  selected {snap['records_selected']}", file=sys.stderr,
                  flush=True)
        if now - self._last_status > STATUS_S:
            self._last_status = now
            self.running()

    def cutflow(self, frame, rows: list, totals: dict) -> str:
        """result/cutflow.parquet (renamed into place) and cutflow.json; returns the Parquet."""
        final = self.rundir.file("result/cutflow.parquet")
        frame.to_parquet(final + ".tmp", index=False)
        os.replace(final + ".tmp", final)
        write_json(self.rundir.file("result/cutflow.json"), {"ops": rows, "totals": totals})
        return final

    def _close(self) -> None:
        for w in (self.metrics_w, self.plan_w):
            if w is not None:
                w.close()

    def finish(self, summary: dict) -> None:
        self._close()
        write_json(self.rundir.file("summary.json"), summary)
        self.rundir.set_status("finished")

    def fail(self, exc: BaseException) -> None:
        """Best effort: the run's own error is what the caller must see."""
        try:
            self.rundir.set_status("failed", error=str(exc))
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
