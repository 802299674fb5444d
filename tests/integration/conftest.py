import os

import pytest


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray for the whole session (ray.init costs seconds), on loopback, 2 CPUs."""
    import ray
    from pairflow.engine.run.runtime import init_ray
    if not ray.is_initialized():
        init_ray(num_cpus=2, object_store_mb=1024)
    yield
    ray.shutdown()


@pytest.fixture
def runs(tmp_path):
    return str(tmp_path / "runs")
