"""The peak memory of a whole process tree (a command and every process it starts: Ray's
daemons and workers included), sampled from /proc: psutil is not a dependency here.

Why: a run's memory is not its driver's; the RSS of every process under the command, summed
at each sample, is what the machine must hold. Shared pages (Ray's object store, mapped in
several workers) count once per process that maps them, so the sum is an upper bound; the
proportional set size (PSS, from ``smaps_rollup``) is also summed where readable, which counts a
shared page once in all.

    from tree_memory import run_measured
    rc, peak = run_measured(["pairflow", ...], interval=0.2)
"""
from __future__ import annotations

import os
import subprocess
import threading
import time


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    return kids


def tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    kids, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def _kib(path: str, field: str) -> int:
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _name(pid: int) -> str:
    """A process's command line, shortened: Ray names its workers in their title."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            words = fh.read().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(os.path.basename(w.decode(errors="replace")) if i == 0 else
                    w.decode(errors="replace") for i, w in enumerate(words[:3]) if w)
    return text[:80]


def sample(pid: int, detail: bool = False) -> dict:
    """RSS and PSS (bytes) of the tree under ``pid`` now and its process count; ``detail``:
    also each process's (name, rss, pss), largest RSS first."""
    pids = tree(pid)
    each = [(p, _kib(f"/proc/{p}/status", "VmRSS:") * 1024,
             _kib(f"/proc/{p}/smaps_rollup", "Pss:") * 1024) for p in pids]
    out = {"rss": sum(e[1] for e in each), "pss": sum(e[2] for e in each), "procs": len(pids)}
    if detail:
        out["processes"] = sorted(([_name(p), r, s] for p, r, s in each),
                                  key=lambda e: -e[1])
    return out


class TreeSampler:
    """Samples the tree under ``pid`` every ``interval`` seconds in a thread until ``stop``;
    ``peak`` keeps the largest sum of each kind, ``at_peak`` each process at the sample of the
    largest RSS sum, and ``timeline`` (t, rss, pss) of every sample."""

    def __init__(self, pid: int, interval: float = 0.25):
        self.pid, self.interval = pid, interval
        self.peak = {"rss": 0, "pss": 0, "procs": 0}
        self.timeline: list[tuple[float, int, int]] = []
        self.at_peak: list = []
        self._stop = threading.Event()
        self._t0 = time.time()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "TreeSampler":
        self._thread.start()
        return self

    def _loop(self) -> None:
        while True:
            s = sample(self.pid, detail=True)
            if s["rss"] > self.peak["rss"]:
                self.at_peak = s["processes"]
            for k in self.peak:
                self.peak[k] = max(self.peak[k], s[k])
            self.timeline.append((round(time.time() - self._t0, 2), s["rss"], s["pss"]))
            if self._stop.wait(self.interval):
                return

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return dict(self.peak)


def run_measured(argv: list[str], interval: float = 0.25, timeout: float | None = None,
                 **popen) -> tuple[int, dict, "TreeSampler"]:
    """Run ``argv``; returns its exit code, the tree's peak memory and the sampler (its
    timeline and the processes at the peak). A run
    past ``timeout`` seconds is killed (its whole process group) and returns -9."""
    proc = subprocess.Popen(argv, start_new_session=True, **popen)
    sampler = TreeSampler(proc.pid, interval).start()
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        code = -9
    peak = sampler.stop()
    return code, peak, sampler
