"""A moto S3 server on 127.0.0.1 for the tests that read and write ``s3://`` URLs: the server,
the environment that points boto and s3fs at it, and an s3fs file system with one bucket."""
from __future__ import annotations

import contextlib
import socket

from tests.conftest import need_module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def s3_bucket(monkeypatch, bucket: str):
    """The server started, its address in this process's environment, ``bucket`` made; yields
    the s3fs file system. Everything is stopped and forgotten afterwards."""
    need_module("s3fs")
    moto_server = need_module("moto.server")
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    for key, value in dict(AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
                           AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                           AWS_DEFAULT_REGION="us-east-1").items():
        monkeypatch.setenv(key, value)
    import s3fs
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem(key="testing", secret="testing",
                           client_kwargs={"endpoint_url": f"http://127.0.0.1:{port}"})
    fs.mkdir(bucket)
    try:
        yield fs
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        server.stop()
