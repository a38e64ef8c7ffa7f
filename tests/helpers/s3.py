"""An in-process S3 endpoint (moto server mode) for s3fs / boto3 tests. Loopback only."""
from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from typing import Iterator

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"

_ENV = {
    "AWS_ACCESS_KEY_ID": ACCESS_KEY,
    "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    # never wait on the EC2 instance-metadata service for credentials
    "AWS_EC2_METADATA_DISABLED": "true",
}


@contextmanager
def moto_s3_server() -> Iterator[str]:
    """Start moto's ThreadedMotoServer on 127.0.0.1 (free port), set dummy AWS env vars, yield the endpoint URL.

    Also exports AWS_ENDPOINT_URL_S3 so code that builds its own boto3/aiobotocore/s3fs client
    from plain ``s3://`` URLs reaches the fake server.  Everything is restored on exit.
    """
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = dict(_ENV, AWS_ENDPOINT_URL_S3=endpoint)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield endpoint
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def storage_options(endpoint: str) -> dict:
    """fsspec/s3fs storage options that point at the fake endpoint."""
    return {
        "key": ACCESS_KEY,
        "secret": SECRET_KEY,
        "anon": False,
        "client_kwargs": {"endpoint_url": endpoint, "region_name": REGION},
    }


def make_s3fs(endpoint: str):
    """A fresh (uncached) s3fs.S3FileSystem on the fake endpoint."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **storage_options(endpoint))


def boto3_client(endpoint: str):
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    )


def create_bucket(endpoint: str, prefix: str = "test") -> str:
    """Create a uniquely named bucket and return its name."""
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    boto3_client(endpoint).create_bucket(Bucket=name)
    return name


def pyarrow_s3fs(endpoint: str):
    """pyarrow's own S3FileSystem on the fake endpoint (or a proxy in front of it)."""
    from urllib.parse import urlsplit

    import pyarrow.fs as pafs

    parts = urlsplit(endpoint)
    return pafs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
                             endpoint_override=f"{parts.hostname}:{parts.port}", scheme="http")
