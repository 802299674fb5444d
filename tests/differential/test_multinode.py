"""The harness's shapes on a real cluster (``ray.cluster_utils.Cluster``: a 0-CPU head and three
one-CPU nodes, started once for the module), each run with L3 off and on by a driver of its own,
exact against the brute force, the run directory's invariants held, R within the harness's
factor of the planner's simulation of the way the run was shared (harness.py).
``PAIRFLOW_DIFF_NODE_SHAPES=N`` draws N shapes (CI: 4, the first of them hypothesis's simplest)."""
from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import textwrap

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.differential.harness import note_shape
from tests.differential.shapes import run_shapes
from tests.integration.test_cluster import run_driver, s3_server, shared_cluster  # noqa: F401

pytestmark = [pytest.mark.ray, pytest.mark.multinode, pytest.mark.slow]
SHAPES = int(os.environ.get("PAIRFLOW_DIFF_NODE_SHAPES", "4"))

DRIVER = textwrap.dedent("""
    import json, os, shutil, sys, tempfile
    import ray
    from tests.differential.harness import check, run_shape
    from tests.differential.shapes import Shape
    ray.init(address=os.environ["PAIRFLOW_TEST_ADDRESS"])

    def tuples(x):
        return tuple(tuples(v) for v in x) if isinstance(x, list) else x

    out = []
    fields = json.load(open({shape!r}))
    shape = Shape(**{{k: tuples(v) for k, v in fields.items()}})
    if True:
        for l3 in (False, True):
            where = tempfile.mkdtemp(prefix="pf-diff-")
            try:
                res, resumed = run_shape(shape, where, l3=l3)
                check(shape, res, resumed)
                out.append({{"l3": l3, "R": res.summary["R"] if res else None,
                             "nodes": len(res.summary["node_caches"]) if res else 0}})
            except BaseException as err:
                sys.stderr.write(f"shape {{shape!r}} with l3={{l3}} failed\\n")
                raise
            finally:
                shutil.rmtree(where, ignore_errors=True)
    print(json.dumps(out))
""")


@seed(0)
@settings(max_examples=SHAPES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(shape=run_shapes(executor="ray", max_n=40))
def test_drawn_shapes_on_three_nodes_with_l3_off_and_on(shared_cluster, shape):
    from pathlib import Path
    note_shape(shape)
    here = Path(tempfile.mkdtemp(prefix="pf-diff-nodes-", dir=shared_cluster.scratch))
    (here / "shape.json").write_text(json.dumps(dataclasses.asdict(shape)))
    out = run_driver(here, DRIVER.format(shape=str(here / "shape.json")), shared_cluster)
    assert [r["l3"] for r in out] == [False, True]
    if shape.n > 1:  # the run spread over the cluster's nodes
        assert all(r["nodes"] == 3 for r in out), out
