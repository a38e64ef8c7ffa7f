"""Remote byte transport: ranged reads of an s3:// object through Arrow's C++ S3 client, built
from the same fsspec/s3fs options, or through s3fs itself when an option has no exact Arrow match.

s3fs (aiohttp, in Python) fetches under the GIL that decoding also needs; Arrow's client does not
hold it (bench/RESULTS-objstore.md). Listing, stat, commits and writes stay with fsspec/s3fs.
"""
from __future__ import annotations

import logging
import os
import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from pageindex.errors import UnmappedOptionError

log = logging.getLogger("pageindex.io")

# The storage option (pageindex's own, never passed to s3fs) that chooses the transport.
TRANSPORT_OPTION = "s3_transport"
# The attribute resolve() sets on an s3fs instance whose reads must stay with s3fs.
_FSSPEC_MARK = "_pageindex_reads_through_fsspec"
# A region is part of the request signature; a custom endpoint (MinIO, Ceph, a proxy) serves its
# objects whatever the region, so with one and no region given no lookup is made: this one is used.
CUSTOM_ENDPOINT_REGION = "us-east-1"


class Transport(str, Enum):
    """How a remote Source fetches its bytes."""

    ARROW = "arrow"  # pyarrow.fs.S3FileSystem, when every option maps (the default)
    FSSPEC = "fsspec"  # s3fs, as listing and writes do


# s3fs options that change nothing about what a ranged read returns or how it is authorized.
_NO_READ_EFFECT = frozenset({
    "default_block_size", "default_fill_cache", "default_cache_type", "max_concurrency",
    "use_listings_cache", "listings_expiry_time", "max_paths", "skip_instance_cache",
    "cache_regions", "fixed_upload_size", "asynchronous", "loop", "local_expiry_check",
})
_CONFIG_NO_READ_EFFECT = frozenset({"max_pool_connections", "tcp_keepalive", "user_agent_extra"})


# botocore's retry modes with an Arrow equivalent; arrow_kwargs gives (mode, attempts), and the
# strategy object is made with the filesystem (it has no value equality to cache by).
_RETRY_STRATEGIES = {"standard": "AwsStandardS3RetryStrategy", "legacy": "AwsDefaultS3RetryStrategy"}


# What the AWS SDK says when a response body does not fit the buffer it was to be written to.
_BROKEN_BODY = ("Failed to flush response stream",)
# Full-jitter exponential backoff, as the SDK's own retries (seconds).
_BACKOFF_BASE, _BACKOFF_CAP = 0.025, 20.0


def transport_option(options: dict[str, Any]) -> tuple[Transport, dict[str, Any]]:
    """The transport named in storage options (default arrow), and the options without it."""
    rest = dict(options)
    value = rest.pop(TRANSPORT_OPTION, Transport.ARROW.value)
    try:
        return Transport(value), rest
    except ValueError:
        choices = ", ".join(t.value for t in Transport)
        raise ValueError(f"storage option {TRANSPORT_OPTION}={value!r}: expected one of {choices}") from None


def mark_fsspec_reads(fs: Any) -> None:
    """Keep the reads of Sources on this s3fs instance on s3fs (resolve() does it for
    s3_transport=fsspec on instances of its own, one per distinct options, as fsspec shares its
    cached ones)."""
    setattr(fs, _FSSPEC_MARK, True)


def arrow_kwargs(options: dict[str, Any], environ: dict[str, str] | None = None) -> dict[str, Any]:
    """pyarrow.fs.S3FileSystem keyword arguments equivalent to s3fs `options` (env vars as botocore
    reads them); raises UnmappedOptionError naming the first option that has no exact equivalent. The region
    is left out when it must be looked up (AWS's endpoint and none given; `_filesystem` does)."""
    env = os.environ if environ is None else environ
    opts = dict(options)
    client = dict(opts.pop("client_kwargs", None) or {})
    config = dict(opts.pop("config_kwargs", None) or {})
    out: dict[str, Any] = {}
    key, secret = opts.pop("key", None) or opts.pop("username", None), opts.pop("secret", None) or opts.pop("password", None)
    token = opts.pop("token", None)
    profile = opts.pop("profile", None)
    if opts.pop("anon", False):
        out["anonymous"] = True
    elif key or secret:
        out.update(access_key=key, secret_key=secret, session_token=token)
    elif profile:
        out.update(_profile_credentials(profile))
    use_ssl = opts.pop("use_ssl", True)
    endpoint = (opts.pop("endpoint_url", None) or client.pop("endpoint_url", None)
                or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL"))
    region = (client.pop("region_name", None) or config.pop("region_name", None)
              or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
              or (_profile_region(profile) if environ is None or profile else None))
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        if parts.path.strip("/"):
            raise UnmappedOptionError(f"endpoint_url {endpoint!r} has a path")
        out.update(endpoint_override=parts.netloc, scheme=parts.scheme)
        out["region"] = region or CUSTOM_ENDPOINT_REGION
    else:
        if not use_ssl:
            out["scheme"] = "http"
        if region:
            out["region"] = region
    verify = client.pop("verify", None)
    if verify is False:
        raise UnmappedOptionError("client_kwargs.verify=False (Arrow always verifies TLS certificates)")
    if isinstance(verify, str):
        out["tls_ca_file_path"] = verify
    retries = dict(config.pop("retries", None) or {})
    mode = retries.pop("mode", "legacy")
    if retries.keys() - {"max_attempts", "total_max_attempts"}:
        raise UnmappedOptionError(f"config_kwargs.retries {sorted(retries)}")
    # botocore's max_attempts counts retries after the first attempt; Arrow's counts attempts.
    attempts = retries.get("total_max_attempts") or retries.get("max_attempts", 4) + 1
    if mode not in _RETRY_STRATEGIES:
        raise UnmappedOptionError(f"config_kwargs.retries.mode={mode!r}")
    out["retry_strategy"] = (mode, attempts)
    if "connect_timeout" in config:
        out["connect_timeout"] = float(config.pop("connect_timeout"))
    addressing = (config.pop("s3", None) or {}).get("addressing_style", "auto")
    if addressing == "virtual":
        out["force_virtual_addressing"] = True
    elif addressing not in ("auto", "path"):
        raise UnmappedOptionError(f"config_kwargs.s3.addressing_style={addressing!r}")
    left = sorted(opts.keys() - _NO_READ_EFFECT) + [f"client_kwargs.{k}" for k in sorted(client)] + \
        [f"config_kwargs.{k}" for k in sorted(config.keys() - _CONFIG_NO_READ_EFFECT)]
    if left:
        raise UnmappedOptionError(f"{', '.join(left)} (no exact pyarrow.fs.S3FileSystem equivalent)")
    return {k: v for k, v in out.items() if v is not None}


def _profile_credentials(profile: str) -> dict[str, Any]:
    """A named profile's credentials, resolved by botocore now (a snapshot: Arrow cannot refresh
    them; a profile that assumes a role would expire mid-run, so it is left to s3fs)."""
    import botocore.session
    from botocore.exceptions import ProfileNotFound

    session = botocore.session.Session(profile=profile)
    try:
        config = session.get_scoped_config()
    except ProfileNotFound as err:
        raise UnmappedOptionError(str(err)) from None
    if "role_arn" in config or "credential_process" in config or "sso_session" in config:
        raise UnmappedOptionError(f"profile {profile!r} has refreshing credentials")
    creds = session.get_credentials()
    if creds is None:
        raise UnmappedOptionError(f"profile {profile!r} has no credentials")
    frozen = creds.get_frozen_credentials()
    return {"access_key": frozen.access_key, "secret_key": frozen.secret_key, "session_token": frozen.token}


@lru_cache(maxsize=None)  # a botocore session reads the config files: once per profile
def _profile_region(profile: str | None) -> str | None:
    """The region of the named profile, or of AWS_PROFILE's (or the default) one, as botocore
    reads ~/.aws/config."""
    import botocore.session
    from botocore.exceptions import ProfileNotFound

    try:
        return botocore.session.Session(profile=profile).get_config_variable("region")
    except ProfileNotFound as err:
        raise UnmappedOptionError(str(err)) from None


_lock = threading.Lock()
_filesystems: dict[str, Any] = {}
_regions: dict[str, str] = {}
_told: set[str] = set()


@dataclass(frozen=True)
class ArrowObject:
    """An object opened through Arrow's S3 client, with what its HEAD said (the one request an
    open makes: pyarrow can open only by path, so the size is asked for, not given)."""

    handle: Any  # pyarrow NativeFile: ReadAt is thread-safe and releases the GIL
    size: int
    mtime: float | None
    etag: str | None
    attempts: int  # as the retry strategy's: for the failures it does not retry

    def read(self, offset: int, length: int) -> bytes:
        """The bytes at `offset`. A response body the SDK could not write into the read's buffer
        (an error document longer than a small read, such as a 503 SlowDown's for 4 bytes) comes
        back as a non-retryable INTERNAL_FAILURE instead of the store's error: fetched again here,
        within the configured attempts, as the SDK retries the same error on a bigger read."""
        for attempt in range(1, self.attempts + 1):
            try:
                return self.handle.read_at(length, offset)
            except OSError as err:
                if attempt == self.attempts or not any(s in str(err) for s in _BROKEN_BODY):
                    raise
                time.sleep(min(_BACKOFF_CAP, _BACKOFF_BASE * 2 ** attempt * random.random()))
        raise AssertionError("unreachable")


def open_arrow(fs: Any, path: str) -> ArrowObject | None:
    """The object at `path` (bucket/key) of s3fs `fs`, opened through Arrow; None when fs's
    options do not all map (said once per reason in the log), fs is not s3fs, or resolve() chose
    s3fs reads. Arrow's errors propagate (FileNotFoundError for a missing object)."""
    if getattr(fs, _FSSPEC_MARK, False) or not is_s3(fs):
        return None
    try:
        kwargs = arrow_kwargs(getattr(fs, "storage_options", {}))
    except UnmappedOptionError as why:
        _tell_once(f"s3 reads go through s3fs: {why}")
        return None
    path = fs._strip_protocol(path)  # s3fs takes s3://bucket/key too; Arrow only bucket/key
    handle = _filesystem(kwargs, path.split("/", 1)[0]).open_input_file(path)
    meta = {_text(k).lower(): _text(v) for k, v in handle.metadata().items()}
    modified = meta.get("last-modified")
    mtime = datetime.fromisoformat(modified.replace("Z", "+00:00")).timestamp() if modified else None
    return ArrowObject(handle, handle.size(), mtime, meta.get("etag") or None, kwargs["retry_strategy"][1])


def is_s3(fs: Any) -> bool:
    """Whether fsspec filesystem `fs` is s3fs (its protocol is one name or a tuple of them)."""
    protocol = getattr(fs, "protocol", ())
    return "s3" in ((protocol,) if isinstance(protocol, str) else tuple(protocol))


def _filesystem(kwargs: dict[str, Any], bucket: str) -> Any:
    """One pyarrow S3FileSystem per distinct options (and looked-up region) per process."""
    import pyarrow.fs as pafs

    if "region" not in kwargs:  # AWS's own endpoint, no region given: the bucket's, looked up once
        with _lock:
            region = _regions.get(bucket)
        if region is None:
            region = pafs.resolve_s3_region(bucket)
            with _lock:
                _regions[bucket] = region
        kwargs = {**kwargs, "region": region}
    token = repr(sorted(kwargs.items()))
    with _lock:
        found = _filesystems.get(token)
        if found is None:
            mode, attempts = kwargs["retry_strategy"]
            strategy = getattr(pafs, _RETRY_STRATEGIES[mode])(max_attempts=attempts)
            found = _filesystems[token] = pafs.S3FileSystem(**{**kwargs, "retry_strategy": strategy})
        return found


def _tell_once(message: str) -> None:
    with _lock:
        if message in _told:
            return
        _told.add(message)
    log.warning(message)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
