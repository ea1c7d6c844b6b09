"""An S3-compatible bucket for tests: moto's standalone server, started as a subprocess.

The storage code under test talks to it over HTTP through boto3 exactly as it would to
AWS or MinIO; nothing is patched. ``s3_server`` starts one server per test session on a
free port; ``s3_bucket`` makes a fresh bucket per test and gives the environment that
selects it (the variables contextops.settings reads).
"""

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import boto3
import httpx
import pytest

ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key"
REGION = "us-east-1"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class S3Server:
    url: str
    port: int
    process: subprocess.Popen

    def client(self):
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )


@dataclass
class S3Bucket:
    server: S3Server
    name: str

    def env(self, endpoint_url: str | None = None) -> dict[str, str]:
        """The environment that points contextops at this bucket (through ``endpoint_url``)."""
        return {
            "AWS_STORAGE_BUCKET_NAME": self.name,
            "AWS_S3_ENDPOINT_URL": endpoint_url or self.server.url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_S3_REGION_NAME": REGION,
        }

    def storages(self) -> dict:
        """STORAGES as contextops.settings builds it from ``env()``."""
        return {
            "default": {
                "BACKEND": "storages.backends.s3.S3Storage",
                "OPTIONS": {
                    "bucket_name": self.name,
                    "endpoint_url": self.server.url,
                    "region_name": REGION,
                    "access_key": ACCESS_KEY,
                    "secret_key": SECRET_KEY,
                    "addressing_style": "path",
                    "default_acl": None,
                    "file_overwrite": False,
                    "location": "",
                },
            },
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        }

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.server.client().get_paginator("list_objects_v2")
        return [
            item["Key"]
            for page in pages.paginate(Bucket=self.name, Prefix=prefix)
            for item in page.get("Contents", [])
        ]

    def read(self, key: str) -> bytes:
        return self.server.client().get_object(Bucket=self.name, Key=key)["Body"].read()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/moto-api/", timeout=1)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.1)
        yield S3Server(url=url, port=port, process=process)
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def s3_bucket(s3_server) -> S3Bucket:
    name = f"contextops-{secrets.token_hex(6)}"
    s3_server.client().create_bucket(Bucket=name)
    return S3Bucket(server=s3_server, name=name)
