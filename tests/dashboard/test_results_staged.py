"""The dashboard's reader of a live dense result's staged tiles (dashboard/results_staged.py):
records found on their columns, values put into any window of rows x columns, mirrored tiles
transposed, a record failing its CRC left out. The logs are written by the engine's own writer;
the oracle is the matrix itself, cut by hand."""
from __future__ import annotations

import numpy as np
import pytest

from pairflow.dashboard.results_staged import StagedTiles
from pairflow.engine.pairs.sinks.tile_log import LogWriter, encode_record


def _stage(directory, values, leaf, symmetric, writers=2):
    n_rows, n_cols = values.shape
    logs = [LogWriter(str(directory)) for _ in range(writers)]
    k = 0
    for r0 in range(0, n_rows, leaf):
        for c0 in range(0, n_cols, leaf):
            if symmetric and c0 < r0:
                continue
            r1, c1 = min(r0 + leaf, n_rows), min(c0 + leaf, n_cols)
            mirror = symmetric and r0 != c0
            blob, _ = encode_record("value", (r0, r1, c0, c1), mirror, values[r0:r1, c0:c1])
            logs[k % writers].append(blob)
            k += 1
    for log in logs:
        log.close()
    return k


@pytest.mark.parametrize("symmetric", [False, True])
def test_overlay_puts_every_window_back(tmp_path, symmetric):
    rng = np.random.default_rng(7)
    values = rng.random((23, 23 if symmetric else 17))
    if symmetric:
        values = np.triu(values) + np.triu(values, 1).T
    n = _stage(tmp_path, values, 4, symmetric)
    staged = StagedTiles(tmp_path)
    assert staged.poll() == n
    assert staged.poll() == 0  # nothing new
    for rows, cols in [(np.arange(23), np.arange(values.shape[1])),
                       (np.arange(5, 11), np.arange(2, 9)),
                       (np.array([20, 3, 9]), np.array([1, 16, 0]))]:
        out = np.full((len(rows), len(cols)), np.nan)
        staged.overlay("value", out, rows, cols)
        np.testing.assert_array_equal(out, values[np.ix_(rows, cols)])
    assert len(staged.records["value"]) == n
    out = np.full((2, 2), np.nan)
    staged.overlay("other", out, np.arange(2), np.arange(2))
    assert np.isnan(out).all()


def test_a_record_failing_its_crc_is_left_out(tmp_path):
    values = np.arange(64, dtype=np.float64).reshape(8, 8)
    _stage(tmp_path, values, 4, False, writers=1)
    log = next(p for p in tmp_path.iterdir())
    data = bytearray(log.read_bytes())
    data[-1] ^= 0xFF  # the last record's last value
    log.write_bytes(bytes(data))
    staged = StagedTiles(tmp_path)
    staged.poll()
    out = np.full((8, 8), np.nan)
    staged.overlay("value", out, np.arange(8), np.arange(8))
    np.testing.assert_array_equal(out[:4], values[:4])
    np.testing.assert_array_equal(out[4:, :4], values[4:, :4])
    assert np.isnan(out[4:, 4:]).all()
