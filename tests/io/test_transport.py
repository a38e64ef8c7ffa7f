"""transport: s3fs options map to pyarrow.fs.S3FileSystem exactly or not at all; on the moto
server an s3:// Source reads through Arrow (one HEAD per file, the same bytes as s3fs), falls back
to s3fs (and says why once) when an option does not map or s3_transport=fsspec, and an Arrow
failure mid-read is a StorageError naming the file and offset."""
from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor

import pytest
import s3fs

from pageindex.errors import StorageError, UnmappedOptionError
from pageindex.io import transport
from pageindex.io.storage import S3_RETRIES, open_source, resolve, s3_options, storage_options_from
from pageindex.io.transport import CUSTOM_ENDPOINT_REGION, TRANSPORT_OPTION, Transport, arrow_kwargs
from tests.helpers import s3 as s3h
from tests.helpers.fault_proxy import FaultProxy, permanent

NO_ENV: dict[str, str] = {}


def test_options_map_exactly():
    kwargs = arrow_kwargs(s3_options(s3h.storage_options("http://127.0.0.1:9000")), NO_ENV)
    assert kwargs == {
        "access_key": s3h.ACCESS_KEY, "secret_key": s3h.SECRET_KEY, "endpoint_override": "127.0.0.1:9000",
        "scheme": "http", "region": s3h.REGION,
        # botocore counts retries after the first attempt; Arrow counts attempts
        "retry_strategy": ("standard", S3_RETRIES["config_kwargs"]["retries"]["max_attempts"] + 1),
    }


def test_region_rule():
    """A custom endpoint never needs a region lookup; AWS's own takes the configured region, or
    leaves it out (looked up per bucket, once)."""
    custom = {"endpoint_url": "https://minio.example:9000"}
    assert arrow_kwargs(custom, NO_ENV)["region"] == CUSTOM_ENDPOINT_REGION
    assert arrow_kwargs(custom, {"AWS_REGION": "eu-west-3"})["region"] == "eu-west-3"
    assert arrow_kwargs({"client_kwargs": {"region_name": "ap-south-1"}}, NO_ENV)["region"] == "ap-south-1"
    assert "region" not in arrow_kwargs({}, NO_ENV)
    from_env = arrow_kwargs({}, {"AWS_ENDPOINT_URL_S3": "http://h:1", "AWS_DEFAULT_REGION": "us-west-2"})
    assert (from_env["endpoint_override"], from_env["scheme"], from_env["region"]) == ("h:1", "http", "us-west-2")


def test_credentials_and_flags():
    assert arrow_kwargs({"anon": True}, NO_ENV)["anonymous"] is True
    mapped = arrow_kwargs({"key": "k", "secret": "s", "token": "t", "use_ssl": False,
                           "config_kwargs": {"connect_timeout": 5, "s3": {"addressing_style": "virtual"},
                                             "retries": {"max_attempts": 2, "mode": "legacy"}},
                           "default_block_size": 1 << 20}, NO_ENV)
    assert mapped == {"access_key": "k", "secret_key": "s", "session_token": "t", "scheme": "http",
                      "connect_timeout": 5.0, "force_virtual_addressing": True,
                      "retry_strategy": ("legacy", 3)}


@pytest.mark.parametrize("options, named", [
    ({"requester_pays": True}, "requester_pays"),
    ({"version_aware": True}, "version_aware"),
    ({"s3_additional_kwargs": {"SSECustomerKey": "x"}}, "s3_additional_kwargs"),
    ({"client_kwargs": {"verify": False}}, "verify"),
    ({"config_kwargs": {"read_timeout": 3}}, "read_timeout"),
    ({"config_kwargs": {"retries": {"mode": "adaptive"}}}, "adaptive"),
    ({"endpoint_url": "http://h:1/prefix"}, "path"),
])
def test_unmappable_options_are_named(options, named):
    with pytest.raises(UnmappedOptionError, match=named):
        arrow_kwargs(options, NO_ENV)


def test_transport_option():
    assert storage_options_from(None, [], "fsspec")[TRANSPORT_OPTION] == "fsspec"
    assert storage_options_from(None, [f"{TRANSPORT_OPTION}=arrow"]) == {TRANSPORT_OPTION: "arrow"}
    assert transport.transport_option({"anon": True}) == (Transport.ARROW, {"anon": True})
    with pytest.raises(ValueError, match="arrow, fsspec"):
        transport.transport_option({TRANSPORT_OPTION: "boto"})


@pytest.fixture
def proxied(s3_server, s3fs_fs, s3_bucket):
    """An object on the moto server, and a proxy in front of it counting requests."""
    data = os.urandom(300_000)
    s3fs_fs.pipe(f"{s3_bucket}/o.bin", data)
    with FaultProxy(s3_server) as proxy:
        yield proxy, f"{s3_bucket}/o.bin", data


def _fs(proxy: FaultProxy, **extra) -> s3fs.S3FileSystem:
    return s3fs.S3FileSystem(skip_instance_cache=True, **s3_options({**s3h.storage_options(proxy.endpoint), **extra}))


def _read_all(path: str, fs) -> tuple[bytes, bool]:
    with open_source(path, fs) as source:
        source.prefetch([(0, 1000), (200_000, 100_000)])
        data = source.read(0, 1000) + source.read(1000, 199_000) + source.read(200_000, source.size)
        return data, source._remote is not None


@pytest.mark.parametrize("scheme", ["", "s3://"])
def test_arrow_reads_with_one_head(proxied, scheme):
    proxy, path, data = proxied
    proxy.reset()
    assert _read_all(scheme + path, _fs(proxy)) == (data, True)
    assert proxy.stats.by_operation() == {"HeadObject": 1, "GetObject": 3}


def test_fallback_to_s3fs_is_said_once(proxied, caplog):
    proxy, path, data = proxied
    transport._told.clear()
    with caplog.at_level(logging.WARNING, "pageindex.io"):
        for _ in range(2):
            assert _read_all(path, _fs(proxy, requester_pays=True)) == (data, False)
    assert [r.getMessage() for r in caplog.records] == [
        "s3 reads go through s3fs: requester_pays (no exact pyarrow.fs.S3FileSystem equivalent)"]


def test_fsspec_transport_chosen(proxied):
    proxy, path, data = proxied
    options = {**s3h.storage_options(proxy.endpoint), TRANSPORT_OPTION: "fsspec"}
    fs, inner = resolve(f"s3://{path}", storage_options=options)
    arrow_fs, _ = resolve(f"s3://{path}", storage_options={**options, TRANSPORT_OPTION: "arrow"})
    assert fs is not arrow_fs
    assert _read_all(inner, fs) == (data, False)
    assert _read_all(inner, arrow_fs) == (data, True)


def test_fsspec_transport_one_s3fs_per_options(proxied, monkeypatch):
    """s3_transport=fsspec: one s3fs per distinct options, whatever the file or thread, kept out
    of fsspec's instance cache, so the instance other fsspec users get still reads through Arrow."""
    proxy, path, data = proxied
    options = {**s3h.storage_options(proxy.endpoint), TRANSPORT_OPTION: "fsspec"}
    built = []
    real_init = s3fs.S3FileSystem.__init__

    def counting_init(self, *args, **kwargs):
        built.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "__init__", counting_init)
    with ThreadPoolExecutor(2) as pool:
        found = list(pool.map(lambda i: resolve(f"s3://{path}.{i}", storage_options=options), range(6)))
    assert len(built) == 1 and all(fs is built[0] for fs, _ in found)
    assert [inner for _, inner in found] == [f"{path}.{i}" for i in range(6)]
    other = {**options, "config_kwargs": {"retries": {"max_attempts": 2, "mode": "standard"}}}
    assert resolve(f"s3://{path}", storage_options=other)[0] is built[1] and len(built) == 2
    monkeypatch.undo()

    assert not any(fs in built for fs in s3fs.S3FileSystem._cache.values())
    shared = s3fs.S3FileSystem(**s3_options(s3h.storage_options(proxy.endpoint)))
    assert shared not in built
    assert _read_all(path, built[0]) == (data, False)
    assert _read_all(path, shared) == (data, True)


def test_arrow_failure_is_a_storage_error(proxied):
    """Retries as configured (1 retry: 2 attempts), then the file and offset in the error."""
    proxy, path, _ = proxied
    fs = _fs(proxy, config_kwargs={"retries": {"max_attempts": 1, "mode": "standard"}})
    with open_source(path, fs) as source:
        proxy.reset(permanent("500", operations={"GetObject"}))
        with pytest.raises(StorageError) as err:
            source.read(12_345, 10)
    assert err.value.path == path and err.value.offset == 12_345
    assert proxy.stats.count("GetObject") == 2


def test_missing_object_is_not_found(proxied):
    proxy, path, _ = proxied
    with pytest.raises(StorageError, match="not found"):
        open_source(path + ".missing", _fs(proxy))


def test_profile(tmp_path, monkeypatch):
    """A profile's static keys and region map; one that assumes a role, or is missing, does not."""
    (tmp_path / "credentials").write_text("[p]\naws_access_key_id = AK\naws_secret_access_key = SK\n")
    (tmp_path / "config").write_text("[profile p]\nregion = eu-north-1\n"
                                     "[profile r]\nrole_arn = arn:aws:iam::1:role/x\nsource_profile = p\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_REGION", "AWS_DEFAULT_REGION"):  # the moto fixture's, when it ran first
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    mapped = arrow_kwargs({"profile": "p", "endpoint_url": "http://h:1"}, NO_ENV)
    assert (mapped["access_key"], mapped["secret_key"], mapped["region"]) == ("AK", "SK", "eu-north-1")
    for name in ("r", "missing"):
        with pytest.raises(UnmappedOptionError, match=name):
            arrow_kwargs({"profile": name}, NO_ENV)
