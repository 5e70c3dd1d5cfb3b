"""data.cache=cold: the eviction methods, their record, and the checks."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from benchmarks.data import coldcache
from benchmarks.errors import ConfigError


@pytest.fixture
def dataset(tmp_path):
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(4):
            (tmp_path / cls / f"{i}.jpg").write_bytes(os.urandom(64 * 1024))
    for path in coldcache.dataset_files(tmp_path):
        path.read_bytes()  # warm
    return tmp_path


def test_fadvise_evicts_the_dataset(dataset):
    files = coldcache.dataset_files(dataset)
    before = coldcache.resident_bytes(files)
    if before is None:
        pytest.skip("mincore(2) is not available through libc here: residency cannot be measured")
    done = coldcache.evict(dataset, method="fadvise")
    assert done["method"] == "fadvise" and done["num_files"] == 8 and done["dataset_bytes"] == 8 * 64 * 1024
    if done["resident_before_bytes"] == 0:
        pytest.skip(f"{dataset}'s filesystem keeps no page cache for these files (nothing to evict)")
    assert done["resident_after_bytes"] < done["resident_before_bytes"]
    assert done["resident_after_bytes"] <= 0.05 * done["dataset_bytes"]


def test_drop_caches_refusal_falls_back_under_auto(dataset, monkeypatch):
    monkeypatch.setattr(coldcache, "_drop_caches", lambda: "/proc/sys/vm/drop_caches: Read-only file system")
    done = coldcache.evict(dataset, method="auto")
    assert done["method"] == "fadvise" and "Read-only" in done["drop_caches_refused"]
    with pytest.raises(ConfigError, match="data.cache_evict=drop_caches is not permitted here"):
        coldcache.evict(dataset, method="drop_caches")


def test_prepare_only_for_cold_real_data_on_local_rank_0(dataset, monkeypatch):
    calls = []
    monkeypatch.setattr(coldcache, "evict", lambda path, method: calls.append((path, method)) or {"method": method})
    data = SimpleNamespace(path=str(dataset), cache="cold", cache_evict="fadvise")
    assert coldcache.prepare(data, needs_data=True, local_rank=0) == {"method": "fadvise"}
    assert coldcache.prepare(data, needs_data=True, local_rank=1) == {"method": "by local rank 0"}
    assert coldcache.prepare(data, needs_data=False, local_rank=0) is None  # synthetic reads nothing
    assert (
        coldcache.prepare(
            SimpleNamespace(path=str(dataset), cache="warm", cache_evict="auto"), needs_data=True, local_rank=0
        )
        is None
    )
    assert len(calls) == 1


@pytest.mark.parametrize(
    "cache,method,message",
    [
        ("cool", "auto", "data.cache=cool is not a cache state; use data.cache=warm or data.cache=cold"),
        ("cold", "o_direct", "data.cache_evict=o_direct is not a method; use one of auto, drop_caches, fadvise"),
    ],
)
def test_bad_values(cache, method, message):
    with pytest.raises(ConfigError, match=message):
        coldcache.check(cache, method)


def test_schema_default_is_warm(compose):
    cfg = compose([])
    assert cfg.data.cache == "warm" and cfg.data.cache_evict == "auto"


def test_warm_reads_the_dataset_back(dataset):
    coldcache.evict(dataset, method="fadvise")
    done = coldcache.warm(dataset)
    assert done["num_files"] == 8 and done["bytes_read"] == 8 * 64 * 1024
    if done["resident_after_bytes"] is not None:
        assert done["resident_after_bytes"] >= done["bytes_read"]
