"""CPU seconds of this process and everything it started, by role, sampled from /proc.

Why: on 2 cores an efficiency short of 1 is CPU spent somewhere else. The benchmarks split it
by who spent it: the device actors (compare), the loader workers (load/parse/preprocess), the
engine's coordinating actors (the Coordinator: scheduler, metrics and head node cache; a
NodeCacheActor on other nodes), Ray's own daemons (raylet, GCS, agents) and the driver. A Ray worker process changes its title with the task it runs, so each
sample's CPU is charged to the role its title names at that sample.
"""
from __future__ import annotations

import bisect
import os
import threading
import time
from collections import Counter

ROLES = (("DeviceActor", "device actors"), ("DeviceWorker", "device actors"), ("load_item", "loaders"), ("check_items", "loaders"),
         ("ray::IDLE", "loaders"), ("NodeCache", "coordination"), ("Coordinator", "coordination"),
         ("Scheduler", "coordination"), ("Metrics", "coordination"), ("ray::", "other Ray workers"), ("raylet", "Ray daemons"),
         ("gcs_server", "Ray daemons"), ("dashboard", "Ray daemons"), ("ray/_private", "Ray daemons"),
         ("ray/autoscaler", "Ray daemons"))


def role_of(title: str, pid: int) -> str:
    if pid == os.getpid():
        return "driver"
    for needle, role in ROLES:
        if needle in title:
            return role
    return "other"


class CpuMeter:
    """Samples every ``interval`` s in a thread; ``at(t)`` is the total at wall time t and
    ``roles_between(t0, t1)`` the split by role (a process keeps what it had when it exited).

    ``clock``, ``read_stat`` and ``read_machine`` stand for the wall clock, ``_stat`` and
    ``_machine``: the tests drive the meter with known clocks and CPU counts."""

    def __init__(self, interval: float = 0.2, rescan_every: int = 5, clock=time.time,
                 read_stat=None, read_machine=None):
        self.tick = os.sysconf("SC_CLK_TCK")
        self.clock = clock
        self.read_stat = read_stat or self._stat
        self.read_machine = read_machine or self._machine
        # reading every process of the machine every sample costs CPU that would be charged to
        # the driver: the whole of /proc is read every ``rescan_every`` samples to find new
        # processes, and only this process's tree in between
        self.rescan_every, self.n_samples, self.interval = rescan_every, 0, interval
        self.mine: set[int] = set()
        self.last: dict[int, float] = {}
        self.totals: Counter = Counter()
        # (wall time, CPU seconds by role, the machine's idle and stolen seconds)
        self.samples: list[tuple[float, dict, dict]] = []
        self.stop_event = threading.Event()
        self.sample()
        self.thread = threading.Thread(target=self._loop, args=(interval,), daemon=True)
        self.thread.start()

    def _stat(self, pids=None) -> dict[int, tuple[int, float, str]]:
        out = {}
        for d in (os.listdir("/proc") if pids is None else map(str, pids)):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as fh:
                    rest = fh.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{d}/cmdline", "rb") as fh:
                    title = fh.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            out[int(d)] = (int(rest[1]), (int(rest[11]) + int(rest[12])) / self.tick, title)
        return out

    def _mine(self, stat) -> set[int]:
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in stat.items():
            children.setdefault(ppid, []).append(pid)
        mine, frontier = {os.getpid()}, [os.getpid()]
        while frontier:
            for c in children.get(frontier.pop(), []):
                if c not in mine:
                    mine.add(c)
                    frontier.append(c)
        return mine

    def sample(self) -> None:
        if self.n_samples % self.rescan_every == 0:
            stat = self.read_stat()
            self.mine = self._mine(stat)
        else:
            stat = self.read_stat(self.mine)
        self.n_samples += 1
        for pid in self.mine:
            if pid in stat:
                cpu, title = stat[pid][1], stat[pid][2]
                self.totals[role_of(title, pid)] += cpu - self.last.get(pid, 0.0)
                self.last[pid] = cpu
        self.samples.append((self.clock(), dict(self.totals), self.read_machine()))

    def _machine(self) -> dict[str, float]:
        """The machine's CPU seconds since boot that no process had (/proc/stat): idle (with
        I/O wait), and stolen by the VM's host (the vCPUs wanted to run, the host ran others)."""
        with open("/proc/stat") as fh:
            f = fh.readline().split()  # cpu user nice system idle iowait irq softirq steal
        return {"idle": (int(f[4]) + int(f[5])) / self.tick,
                "stolen by the VM host": int(f[8]) / self.tick}

    def _loop(self, interval):
        while not self.stop_event.wait(interval):
            self.sample()

    def _totals_at(self, t: float, machine: bool = False) -> dict:
        """Every role's CPU seconds at wall time ``t`` (``machine``: the machine's idle and
        stolen seconds), interpolated between the samples around it (the nearest sample was
        off by up to half an interval at each end of a window)."""
        part = 2 if machine else 1
        times = [x[0] for x in self.samples]
        i = bisect.bisect_left(times, t)
        if i == 0:
            return dict(self.samples[0][part])
        if i >= len(self.samples):
            return dict(self.samples[-1][part])
        t0, a = self.samples[i - 1][0], self.samples[i - 1][part]
        t1, b = self.samples[i][0], self.samples[i][part]
        w = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
        return {k: a.get(k, 0.0) + w * (b.get(k, 0.0) - a.get(k, 0.0)) for k in set(a) | set(b)}

    def at(self, t: float) -> float:
        """CPU seconds at wall time ``t``."""
        return sum(self._totals_at(t).values())

    def _sampled_past(self, t: float) -> None:
        """Wait until a sample at or after wall time ``t`` exists. A window read at once after
        a run ends lies partly past the last sample (up to one interval): its CPU, but not its
        length, was cut off and came out as "other processes" (~2 % of the forensics runs'
        cores at 0.5 s, where a second later it read ~1 %)."""
        while (self.samples[-1][0] < t and not self.stop_event.is_set()
               and self.thread.is_alive()):  # (a sampler that died takes no more samples)
            self.stop_event.wait(self.interval / 4)

    def roles_between(self, t0: float, t1: float, machine: bool = False) -> dict[str, float]:
        self._sampled_past(t1)
        a, b = self._totals_at(t0, machine), self._totals_at(t1, machine)
        return {k: b.get(k, 0.0) - a.get(k, 0.0) for k in b if b.get(k, 0.0) - a.get(k, 0.0) > 0}

    def shares_between(self, t0: float, t1: float, cores: int = 2) -> dict[str, float]:
        """Each role's fraction of ``cores`` cores over [t0, t1], largest first, then the
        machine's ``idle`` and ``stolen by the VM host`` (``/proc/stat``), and ``other
        processes``: the rest, CPU this process tree did not spend (the system's own
        processes and kernel threads). Until 2026-11-28 ``idle`` was that rest and idle
        together: 3-5 % of the apps' runs, where /proc/stat showed ~1 % idle."""
        capacity = cores * max(t1 - t0, 1e-9)
        roles = self.roles_between(t0, t1)
        shares = {k: v / capacity for k, v in sorted(roles.items(), key=lambda kv: -kv[1])}
        machine = self.roles_between(t0, t1, machine=True)
        for k in ("idle", "stolen by the VM host"):
            shares[k] = min(machine.get(k, 0.0) / capacity, max(0.0, 1 - sum(shares.values())))
        shares["other processes"] = max(0.0, 1 - sum(shares.values()))
        return shares

    def close(self) -> None:
        self.stop_event.set()
        self.thread.join()
        self.sample()
