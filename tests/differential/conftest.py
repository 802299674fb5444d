from tests.integration.conftest import ray_local  # noqa: F401  (one local Ray per session)
