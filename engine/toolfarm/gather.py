"""``pairflow gather RUN_DIR STREAM [-o FILE]``: one stream of a farm in input order, every
block's CRC checked on the way.

Units come out in the order of their input records whichever node wrote them and whenever. A
block that fails its CRC stops the gather (a resume reruns that unit); units with no block (they
failed, or the run has not reached them) are left out and listed. ``-o FILE`` is written under a
temporary name and renamed when complete, so FILE is never a partial stream.
"""
from __future__ import annotations

import os
import sys
from typing import BinaryIO

from ..errors import PairflowError
from ..run.rundir import FARM_UNITS, JOURNAL, RESULT, read_json
from .index import last_blocks, read_block


def gather(run_dir: str, stream: str, out: str | BinaryIO | None = None) -> dict:
    """Write ``stream`` in input order to ``out`` (a path, a binary file, or None: stdout);
    returns {"units", "bytes", "missing": [unit ids without a block]}."""
    plan = read_json(os.path.join(run_dir, FARM_UNITS))
    if plan is None:
        raise PairflowError(f"{run_dir} is not a farm's run directory (no {FARM_UNITS})")
    if stream not in plan["streams"]:
        raise PairflowError(f"{run_dir}: no stream {stream!r}; the farm has "
                            f"{', '.join(plan['streams'])}")
    last = last_blocks(os.path.join(run_dir, JOURNAL))
    result = os.path.join(run_dir, RESULT)
    n = len(plan["units"])
    if isinstance(out, str):
        tmp = f"{out}.partial{os.getpid()}"
        with open(tmp, "wb") as fh:
            try:
                report = _copy(last, result, stream, n, fh)
            except BaseException:
                fh.close()
                os.unlink(tmp)
                raise
        os.replace(tmp, out)
        return report
    return _copy(last, result, stream, n, out if out is not None else sys.stdout.buffer)


def _copy(last: dict, result: str, stream: str, n: int, fh: BinaryIO) -> dict:
    missing, total = [], 0
    for unit in range(n):
        entry = last.get((unit, stream))
        if entry is None:
            missing.append(unit)
            continue
        data = read_block(result, entry)
        if data is None:
            raise PairflowError(
                f"gather: unit {unit}'s block of {stream} in {entry['location']} (offset "
                f"{entry['offset']}, {entry['length']} bytes) fails its CRC32 check; resume "
                f"the run (resume=true) to rerun it")
        fh.write(data)
        total += len(data)
    fh.flush()
    return {"units": n - len(missing), "bytes": total, "missing": missing}
