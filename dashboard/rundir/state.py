"""The run's state and progress: what the header and the overview of every view show.

One definition of "where is this run": its state (a run that has written nothing is *waiting*; a
summary without a status means *finished*), done/total of each counter it reports, recent and
average throughput, the ETA and R. Mixed into the run view (:class:`.core.RunView`), whose files
and readers it reads: the last metrics snapshot, tiles.jsonl and the plan.
"""

from __future__ import annotations

from .base import locked
from .values import first, max_of, num, prog

__all__ = ["RunState", "TERMINAL_STATES", "WAITING"]

TERMINAL_STATES = ("finished", "failed", "interrupted")
#: state shown before anything of the run exists
WAITING = "waiting for run"


class RunState:
    """State, progress, throughput, ETA and R of the run (methods of :class:`.core.RunView`)."""

    @locked
    def is_empty(self) -> bool:
        """Nothing of the run exists yet (new or empty directory)."""
        return not (self.meta or self.status or self.snapshots.rows or self.matrix.done or self.summary)

    @locked
    def state(self) -> str:
        st = self.status.get("state")
        if isinstance(st, str) and st:
            return st
        if self.summary:
            return "finished"
        if self.is_empty():
            return WAITING
        return "starting" if not self.snapshots.rows else "running"

    @locked
    def progress(self) -> dict:
        """Done/total counts: tiles, pairs, and any other ``X_done``/``X_total`` counters."""
        meta, last, summ = self.meta, self.snapshots.last, self.summary
        plan = self.matrix.plan()
        out: dict[str, dict] = {}

        tiles_total = first(last.get("tiles_total"), meta.get("tiles_total"), len(plan) or None)
        pairs_total = first(last.get("pairs_total"), meta.get("pairs_total"),
                            plan["pairs"].sum() if len(plan) and plan["pairs"].notna().all() else None)
        done = self.matrix.done_frame() if self.matrix.done else None  # by id, the last record
        tiles_done = max_of(last.get("tiles_done"), len(done) if done is not None else None, summ.get("tiles_done"))
        pairs_jsonl = float(done["pairs"].fillna(0).sum()) if done is not None else None
        pairs_done = max_of(last.get("pairs_done"), pairs_jsonl, summ.get("pairs_done"))
        out["tiles"] = prog(tiles_done, tiles_total)
        out["pairs"] = prog(pairs_done, pairs_total)
        for k in last:
            if k.endswith("_done") and k not in ("tiles_done", "pairs_done"):
                name = k[: -len("_done")]
                out[name] = prog(last.get(k), last.get(name + "_total"))
        return out

    @locked
    def throughput(self, window_s: float | None = None) -> dict:
        """Recent and average rates (per second) of pairs and tiles, from the metrics snapshots."""
        window_s = self.eta_window_s if window_s is None else window_s
        m = self.snapshots.rows
        res = {"pairs_per_s": None, "tiles_per_s": None, "pairs_per_s_avg": None, "tiles_per_s_avg": None,
               "window_s": None}
        if not m:
            return res
        last = m[-1]
        t_end = last["t"]
        # earliest snapshot within the window (at least the previous one)
        j = len(m) - 1
        while j > 0 and t_end - m[j - 1]["t"] <= window_s:
            j -= 1
        if j == len(m) - 1 and j > 0:
            j -= 1
        start = m[j]
        dt = t_end - start["t"]
        if dt > 0:
            res["window_s"] = dt
            for key in ("pairs", "tiles"):
                a, b = start.get(key + "_done"), last.get(key + "_done")
                if a is not None and b is not None:
                    res[key + "_per_s"] = (b - a) / dt
        el = last.get("elapsed")
        if el:
            for key in ("pairs", "tiles"):
                b = last.get(key + "_done")
                if b is not None:
                    res[key + "_per_s_avg"] = b / el
        return res

    @locked
    def eta(self) -> float | None:
        """Seconds to completion from recent throughput; 0 when finished, None when unknown."""
        state = self.state()
        progress = self.progress()
        if state == "finished":
            return 0.0
        if state == "failed":
            return None
        thr = self.throughput()
        for key in ("pairs", "tiles"):
            p, rate = progress.get(key, {}), thr.get(key + "_per_s")
            if p.get("done") is None or p.get("total") is None:
                continue
            remaining = p["total"] - p["done"]
            if remaining <= 0:
                return 0.0
            if rate and rate > 0:
                return remaining / rate
            avg = thr.get(key + "_per_s_avg")
            if avg and avg > 0:
                return remaining / avg
        return None

    @locked
    def r_value(self) -> dict:
        """R so far (summary's R once written, else the latest snapshot's) and its bound."""
        summ, meta, last = self.summary, self.meta, self.snapshots.last
        r = first(summ.get("R"), last.get("R"))
        source = "summary" if summ.get("R") is not None else ("metrics" if last.get("R") is not None else None)
        if r is None:
            loads, n = num(last.get("loads")), first(last.get("n_items"), meta.get("n_items"))
            if loads is not None and n:
                r, source = loads / n, "loads/n"
        return {"R": num(r), "bound_R": num(first(meta.get("bound_R"), last.get("bound_R"), summ.get("bound_R"))),
                "source": source, "loads": num(first(summ.get("loads"), last.get("loads"))),
                "n_items": num(first(last.get("n_items"), meta.get("n_items")))}

    @locked
    def is_stale(self) -> bool:
        """A run that says it is running but has written nothing for ``stale_after_s``
        (it died without saying so, or this is a copy of an unfinished run)."""
        if self.state() in TERMINAL_STATES or self.is_empty():
            return False
        last = self.snapshots.rows[-1]["t"] if self.snapshots.rows else None
        last_t = max_of(self.status.get("updated"), last, num(self.meta.get("started")))
        return last_t is not None and self.clock() - last_t > self.stale_after_s

    @locked
    def overview(self) -> dict:
        """Everything the header and the overview show, in one dict."""
        meta, status = self.meta, self.status
        now = self.clock()
        last = self.snapshots.rows[-1] if self.snapshots.rows else None
        updated = max_of(status.get("updated"), last["t"] if last else None)
        state = self.state()
        started = self.started
        finished_at = num(status.get("finished"))
        if last and last.get("elapsed") is not None:
            elapsed = last["elapsed"]
            if state not in TERMINAL_STATES and not self.is_stale() and last.get("t"):
                elapsed += max(0.0, now - last["t"])
        elif started is not None:
            elapsed = (finished_at or now) - started
        else:
            elapsed = None
        if state in TERMINAL_STATES and finished_at and started:
            elapsed = finished_at - started
        wall = self.summary.get("wall_s")
        if state == "finished" and wall is not None:
            elapsed = num(wall)
        r = self.r_value()
        return {
            **r,
            "run_dir": str(self.run_dir),
            "state": state,
            "error": status.get("error"),
            "kind": meta.get("kind"),
            "app": meta.get("app"),
            "space": meta.get("space"),
            "n_items": first(meta.get("n_items"), r["n_items"]),
            "leaf_items": meta.get("leaf_items"),
            # the planner's choice and the simulated R of every candidate, as the run printed it
            "plan": (meta.get("plan_choice") or {}).get("line") or meta.get("plan"),
            "actors": [a.get("id") for a in meta.get("actors") or [] if isinstance(a, dict)],
            "started": started,
            "updated": updated,
            "age_s": (now - updated) if updated else None,
            "stale": self.is_stale(),
            "elapsed_s": elapsed,
            "progress": self.progress(),
            "throughput": self.throughput(),
            "eta_s": self.eta(),
            "bad_lines": self.bad_lines(),
        }
