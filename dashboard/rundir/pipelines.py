"""The pipelines view's data: an operator pipeline's order and each operator's cost and pass rate.

A pipeline run re-plans its operators' order as it measures them and writes one line per plan to
pipeline.jsonl; the last line is the order in force, and the lines together are each operator's
series over time. At the end, summary.json's ``order_report`` compares the order written, the
order chosen and the run as it went, in seconds per event.
"""

from __future__ import annotations

import pandas as pd

from .base import RowsReader, locked
from .fmt import format_seconds
from .values import num

__all__ = ["Pipelines"]

SERIES = ["sec", "op", "cost_s", "pass_rate", "records_in"]


class Pipelines(RowsReader):
    """pipeline.jsonl (one line per plan) and summary.json's ``order_report``."""

    view = "pipelines"
    streams = ("pipeline",)
    kind = "pipeline"

    @locked
    def has_data(self) -> bool:
        return bool(self.rows)

    @locked
    def frames(self) -> tuple[list[str], pd.DataFrame, pd.DataFrame]:
        """(current operator order, latest per-op table, per-op series over time).

        table columns: position, op, cost_s, pass_rate, records_in; series: sec, op, cost_s,
        pass_rate, records_in."""
        def build():
            if not self.rows:
                return [], pd.DataFrame(columns=["position"] + SERIES[1:]), pd.DataFrame(columns=SERIES)
            rows = []
            for rec in self.rows:
                t = num(rec.get("t"))
                for op, s in (rec.get("ops") or {}).items():
                    if isinstance(s, dict):
                        rows.append({"t": t, "op": str(op), "cost_s": num(s.get("cost_s")),
                                     "pass_rate": num(s.get("pass_rate")), "records_in": num(s.get("records_in"))})
            series = pd.DataFrame(rows, columns=["t", "op", "cost_s", "pass_rate", "records_in"])
            start = self.run.started
            if start is None and series["t"].notna().any():
                start = series["t"].min()
            series["sec"] = series["t"] - (start or 0.0)
            last = self.rows[-1]
            order = [str(o) for o in last.get("order") or []]
            ops = last.get("ops") or {}
            names = order + [o for o in ops if o not in order]
            table = pd.DataFrame([
                {"position": i + 1, "op": o, "cost_s": num((ops.get(o) or {}).get("cost_s")),
                 "pass_rate": num((ops.get(o) or {}).get("pass_rate")),
                 "records_in": num((ops.get(o) or {}).get("records_in"))}
                for i, o in enumerate(names)])
            return order, table, series[SERIES]
        return self.cached("frames", ("pipeline", "meta"), build)

    @locked
    def order_report(self) -> pd.DataFrame:
        """A finished pipeline's orders (summary.json ``order_report``): written, chosen and the
        run as it went, with the cost per event expected and measured; empty before the end."""
        rep = self.run.summary.get("order_report")
        cols = ["", "order", "expected per event", "measured per event", "events"]
        if not isinstance(rep, dict):
            return pd.DataFrame(columns=cols)
        rows = []
        for key, label in (("written", "written"), ("chosen", "chosen"), ("as_run", "as run")):
            e = rep.get(key)
            if not isinstance(e, dict):
                continue
            order = e.get("order")
            rows.append({"": label,
                         "order": " → ".join(map(str, order)) if order else
                         f"{e.get('orders')} order(s)",
                         "expected per event": format_seconds(e.get("expected_s")),
                         "measured per event": format_seconds(e.get("measured_s")),
                         "events": num(e.get("events"))})
        return pd.DataFrame(rows, columns=cols)
