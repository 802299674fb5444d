"""Pre-flight, the part free of Ray: what the app says it will compare, checked before any
process starts, and the checkers' problems turned into one error that names the files.

The driver runs ``loading.measure_stages`` on a sample and ``loading.check_items`` on every
input in its own process (on the Ray path while Ray starts); this module holds what needs
neither.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError, PairflowError
from .policy import ItemMap
from .sizing import app_weights
from .space import PairSpace, PairWeights


@dataclass(frozen=True)
class RunInputs:
    """The items of a run and the space of pairs over them."""

    keys: list[str]            # every item once, in the app's order (item id = position)
    row_keys: list[str]
    col_keys: list[str]
    space: PairSpace
    weights: PairWeights | None  # per-row/column pair costs, for capacity-aware tiles
    items: ItemMap


def read_inputs(app, sink_names: list[str]) -> RunInputs:
    """Keys, space and weights from the app, checked for consistency with each other and
    with the sinks (``sink_names``)."""
    keys = [str(k) for k in app.keys()]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})[:5]
        raise InputError("inputs", f"duplicate item keys: {dup}")
    index = {k: i for i, k in enumerate(keys)}
    row_keys, col_keys = list(map(str, app.row_keys())), list(map(str, app.col_keys()))
    space = app.space()
    if (space.n_rows, space.n_cols) != (len(row_keys), len(col_keys)):
        raise PairflowError(f"space is {space.n_rows} x {space.n_cols} but the app has "
                            f"{len(row_keys)} row keys and {len(col_keys)} column keys")
    if len(keys) < 1 or space.total == 0:
        raise InputError("inputs", f"nothing to compare: {len(keys)} item(s), "
                         f"{space.total} pair(s)")
    weights = app_weights(app, space)  # capacity-aware tiles, for apps with pair_weights()
    if weights is not None and "dense" in sink_names:
        raise PairflowError("the dense sink needs tiles on its chunk grid, but this app cuts "
                            "tiles by pair weights (pair_weights()); use a topk or "
                            "threshold sink, or switch the app's weighting off")
    items = ItemMap(np.array([index[k] for k in row_keys], dtype=np.int64),
                    np.array([index[k] for k in col_keys], dtype=np.int64))
    return RunInputs(keys, row_keys, col_keys, space, weights, items)


def problems_error(problems: list[str]) -> InputError:
    """One error for the pre-flight's problems (``"file: what"`` each): the first ten, and
    how many more there were."""
    if len(problems) == 1:
        file, _, rest = problems[0].partition(": ")
        return InputError(file, rest or problems[0])
    more = f"\n... and {len(problems) - 10} more" if len(problems) > 10 else ""
    return InputError(problems[0].split(":")[0], "\n".join(problems[:10]) + more)
