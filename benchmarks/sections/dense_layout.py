"""The "Dense results on small tiles: files and write time" section of RESULTS.md, from `benchmarks/out/dense_layout.json`
(written by `benchmarks/dense_layout.py`); its explanation is `dense_layout.md` beside this file."""
from __future__ import annotations

from report import num, table


def section(d: dict, ctx) -> list[str]:
    fields = sorted(d["files_per_field"])
    return [table(["field", "files", "chunks", "dask tasks"],
                  [[f, num(d["files_per_field"][f]), num(d["chunks_per_field"][f]),
                    num(d["dask_tasks_per_field"][f])] for f in fields]),
            f"The run: `{d['command']}`. "
            f"{num(d['n'])} records, leaf {num(d['leaf'])}, {num(d['tiles'])} tiles "
            f"({d['executor']}), chunks of {' x '.join(str(c) for c in d['chunk_shape'])}: "
            f"the actors spent {num(d['write_s'], 's')} writing tiles against "
            f"{num(d['compare_s'], 's')} comparing them (write share "
            f"{num(100 * d['write_share'])} %); the driver's finalize, which writes every "
            f"chunk, took {num(d['finalize_s'], 's')} of a {num(d['wall_s'], 's')} run."]
