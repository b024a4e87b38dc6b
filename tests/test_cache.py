"""cache.py: atomic writer, keys, entries (corruption, concurrency, LRU) and compile_cached."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import threading
from pathlib import Path

import pytest

from codegen.build import cache as oc
from codegen.build import toolchain as tc
from require import requires

needs_nvcc = requires("nvcc")      # tests/require.py: skip, or fail under EXPS_REQUIRE

TU = r"""
#include "gen_test.cuh"
extern "C" __global__ void k(unsigned long long* out) { out[threadIdx.x] = twice(threadIdx.x); }
"""
HEADER = "__host__ __device__ inline unsigned long long twice(unsigned long long x) { return 2*x; }\n"
OPTS90 = tc.CompileOptions((90,))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("EXPS_LAUNCHER", "EXPS_ASSERT_NO_COMPILE", "NVCC_PREPEND_FLAGS",
                "NVCC_APPEND_FLAGS", "EXPS_CACHE_MAX_BYTES"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def tu(tmp_path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "gen_test.cuh").write_text(HEADER)
    (src / "k.cu").write_text(TU)
    return src / "k.cu"


# ----------------------------------------------------------------------------- atomic_write

def test_atomic_write(tmp_path, monkeypatch):
    p = tmp_path / "f.bin"
    oc.atomic_write(p, b"one")
    oc.atomic_write(p, b"two")
    assert p.read_bytes() == b"two" and os.listdir(tmp_path) == ["f.bin"]
    assert p.stat().st_mode & 0o777 == 0o666 & ~_umask()

    def boom(src, dst):
        raise OSError("disk on fire")
    monkeypatch.setattr(oc.os, "replace", boom)
    with pytest.raises(OSError, match="disk on fire"):
        oc.atomic_write(p, b"three")
    assert p.read_bytes() == b"two" and os.listdir(tmp_path) == ["f.bin"]  # temp unlinked


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


# ----------------------------------------------------------------------------- keys

def test_key_parts():
    base = dict(tu_text="tu", header_texts={"a.cuh": "A", "b.cuh": "B"},
                nvcc_version_text="release 13.0", flags=["-O3", "-Xptxas", "-v"],
                env={"NVCC_APPEND_FLAGS": "", "NVCC_PREPEND_FLAGS": ""})
    k0 = oc.ObjectCache.key(**base)
    assert len(k0) == 64 and k0 == oc.ObjectCache.key(**base)
    assert k0 == oc.ObjectCache.key(**{**base, "header_texts": {"b.cuh": "B", "a.cuh": "A"}})
    variants = [
        {"tu_text": "tu "},
        {"header_texts": {"a.cuh": "A", "b.cuh": "B2"}},
        {"header_texts": {"a.cuh": "A", "c.cuh": "B"}},
        {"nvcc_version_text": "release 13.1"},
        {"flags": ["-O3", "-Xptxas", "-v", "-lineinfo"]},
        {"flags": ["-Xptxas", "-O3", "-v"]},  # order is meaningful to nvcc
        {"env": {"NVCC_APPEND_FLAGS": "-G", "NVCC_PREPEND_FLAGS": ""}},
        {"launcher": ["ccache"]},
        {"host_compiler_text": "gcc: gcc 13.2.0; g++: g++ 13.2.0"},
    ]
    keys = {oc.ObjectCache.key(**{**base, **v}) for v in variants}
    assert len(keys) == len(variants) and k0 not in keys


@needs_nvcc
def test_key_for_tracks_header_flags_version_and_env(tu, tmp_path, monkeypatch):
    c = oc.ObjectCache(tmp_path / "cache")
    k0 = c.key_for(tu, OPTS90)
    assert k0 == c.key_for(tu, OPTS90)
    assert k0 != c.key_for(tu, tc.CompileOptions((90,), maxrregcount=64))
    with tc.injected_version(tc.NvccInfo.parse("Cuda compilation tools, release 13.1, V13.1.0")):
        assert k0 != c.key_for(tu, OPTS90)
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-lineinfo")
    assert k0 != c.key_for(tu, OPTS90)
    monkeypatch.delenv("NVCC_APPEND_FLAGS")
    (tu.parent / "gen_test.cuh").write_text(HEADER + "// edited\n")  # found by the include scan
    assert k0 != c.key_for(tu, OPTS90)
    assert oc.scan_headers(tu) == {"gen_test.cuh": HEADER + "// edited\n"}


# ----------------------------------------------------------------------------- entries

def test_put_get_roundtrip_and_bad_entries(tmp_path):
    c = oc.ObjectCache(tmp_path)
    key = "ab" * 32
    report = {"k": {"sm_90": {"registers": 8, "spill_stores": 0}}}
    assert c.get(key) is None
    p = c.put(key, b"\x7fELF object bytes", report)
    assert p == c.path(key) and c.get(key) == (b"\x7fELF object bytes", report)
    good = p.read_bytes()
    corruptions = [good[:-3], good[:20], b"", good.replace(b"object", b"OBJECT"),
                   good.replace(oc.CACHE_FORMAT.encode(), b"exps-objcache-0")]
    for bad in corruptions:
        p.write_bytes(bad)
        assert c.get(key) is None and not p.exists()
    c.put(key, b"x", report)
    c.path("cd" * 32).parent.mkdir()
    shutil.copy(p, c.path("cd" * 32))  # a valid entry filed under another key
    assert c.get("cd" * 32) is None


def _hammer(root: str, key: str, n: int) -> int:
    c = oc.ObjectCache(root, max_bytes=1 << 40)
    blob = bytes(range(256)) * 4096  # 1 MiB: same key, same bytes
    bad = 0
    for i in range(n):
        c.put(key, blob, {"writer": "same"})
        if c.get(key) != (blob, {"writer": "same"}):  # torn or missing: entries never vanish
            bad += 1                                  # here unless a reader saw them corrupt
    return bad


def test_concurrent_puts_same_key(tmp_path):
    key = "ef" * 32
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(4) as pool:
        bads = pool.starmap(_hammer, [(str(tmp_path), key, 25)] * 4)
    threads_bad: list[int] = []
    ts = [threading.Thread(target=lambda: threads_bad.append(_hammer(str(tmp_path), key, 10)))
          for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sum(bads) == 0 and sum(threads_bad) == 0
    c = oc.ObjectCache(tmp_path)
    assert c.get(key) is not None
    assert os.listdir(c.path(key).parent) == [c.path(key).name]  # no temp left behind


def test_prune_lru(tmp_path):
    c = oc.ObjectCache(tmp_path, max_bytes=1 << 40)
    keys = [f"{i:02x}" * 32 for i in range(4)]
    for i, k in enumerate(keys):
        c.put(k, bytes(1000), {})
        os.utime(c.path(k), (1000 + i, 1000 + i))  # keys[0] oldest
    assert c.get(keys[0]) is not None  # a hit makes keys[0] the most recent
    size = c.path(keys[0]).stat().st_size
    stale_tmp = c.path(keys[1]).parent / ".x.obj.1.abc.tmp"
    stale_tmp.write_bytes(b"partial")
    os.utime(stale_tmp, (0, 0))
    c.max_bytes = 2 * size
    assert c.prune() == 3  # keys[1], keys[2] and the stale temp
    assert [c.path(k).exists() for k in keys] == [True, False, False, True]
    c.max_bytes = 0
    c.prune()
    assert not any(c.path(k).exists() for k in keys)


def test_put_scans_the_cache_only_when_it_may_be_over_its_bound(tmp_path, monkeypatch):
    """A scan (prune) stats every entry: a put runs one only on the process's first put into a
    root and when what the last scan found plus what this process stored since passes max_bytes
   ; the cache is still at most max_bytes after every put."""
    scans = []
    real = oc.ObjectCache.prune
    monkeypatch.setattr(oc.ObjectCache, "prune", lambda self: scans.append(1) or real(self))
    big = oc.ObjectCache(tmp_path / "c", max_bytes=1 << 40)
    for i in range(20):
        big.put(f"{i:02x}" * 32, bytes(1000), {})
    assert len(scans) == 1                                   # the first put only
    oc.ObjectCache(tmp_path / "c", max_bytes=1 << 40).put("ff" * 32, bytes(1000), {})
    assert len(scans) == 1                                   # one count per root, any instance

    size = big.path("00" * 32).stat().st_size
    small = oc.ObjectCache(tmp_path / "d", max_bytes=3 * size)
    scans.clear()
    for i in range(12):
        small.put(f"{i:02x}" * 32, bytes(1000), {})
        on_disk = sum(f.stat().st_size for f in (tmp_path / "d").rglob("*.obj"))
        assert on_disk <= 3 * size
    assert len(scans) == 1 + 12 - 3    # first put, then every put past the third entry
    assert sorted(p.name[:2] for p in (tmp_path / "d").rglob("*.obj")) == ["09", "0a", "0b"]


def test_default_root_and_max_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPS_CACHE_DIR", str(tmp_path / "envcache"))
    monkeypatch.setenv("EXPS_CACHE_MAX_BYTES", "1K")
    c = oc.ObjectCache()
    assert c.root == tmp_path / "envcache" and c.max_bytes == 1024
    monkeypatch.delenv("EXPS_CACHE_DIR")
    assert oc.ObjectCache().root == Path.home() / ".cache" / "exps-codegen"


# ----------------------------------------------------------------------------- compile_cached

@needs_nvcc
def test_compile_cached_miss_hit_corrupt(tu, tmp_path, monkeypatch):
    c = oc.ObjectCache(tmp_path / "cache")
    out = tmp_path / "build" / "k.o"
    first = c.compile_cached(tu, out, OPTS90, launcher=[])
    assert not first.hit and first.result is not None and (c.hits, c.misses) == (0, 1)
    assert first.report["k"]["sm_90"]["registers"] > 0
    obj = out.read_bytes()
    out.unlink()

    monkeypatch.setenv("EXPS_ASSERT_NO_COMPILE", "1")  # a hit must not run nvcc
    second = c.compile_cached(tu, out, OPTS90, launcher=[])
    assert second.hit and second.result is None and second.key == first.key
    assert second.report == json.loads(json.dumps(first.report))
    assert out.read_bytes() == obj and (c.hits, c.misses) == (1, 1)

    c.path(first.key).write_bytes(c.path(first.key).read_bytes()[:-10])  # truncate
    with pytest.raises(tc.CompileGuardError):  # corrupt entry = miss = a compile
        c.compile_cached(tu, out, OPTS90, launcher=[])
    monkeypatch.delenv("EXPS_ASSERT_NO_COMPILE")
    third = c.compile_cached(tu, out, OPTS90, launcher=[])
    assert not third.hit and c.get(first.key) is not None  # rebuilt and stored again

    (tu.parent / "gen_test.cuh").write_text(HEADER.replace("2*x", "3*x"))
    monkeypatch.setenv("EXPS_ASSERT_NO_COMPILE", "1")
    with pytest.raises(tc.CompileGuardError):  # a header edit is a miss
        c.compile_cached(tu, out, OPTS90, launcher=[])


@needs_nvcc
def test_an_object_made_through_a_launcher_is_keyed_by_it(tu, tmp_path, monkeypatch):
    """The launcher is part of the key: an object that came through a launcher (whose store anyone
    who can write it may have poisoned) is never handed to a compile without that launcher, nor
    the other way round; the same launcher (by its name and arguments, wherever it lies) hits its
    own entry, another launcher does not."""
    shim = tmp_path / "launch.sh"
    shim.write_text('#!/bin/sh\nexec "$@"\n')
    shim.chmod(0o755)
    c = oc.ObjectCache(tmp_path / "cache")
    via = c.compile_cached(tu, tmp_path / "a.o", OPTS90, launcher=[str(shim)])
    plain = c.compile_cached(tu, tmp_path / "b.o", OPTS90, launcher=[])
    assert not via.hit and not plain.hit and via.key != plain.key
    assert c.key_for(tu, OPTS90, launcher=[str(shim)]) == via.key and c.key_for(tu, OPTS90) == plain.key
    monkeypatch.setenv("EXPS_ASSERT_NO_COMPILE", "1")
    assert c.compile_cached(tu, tmp_path / "c.o", OPTS90, launcher=[str(shim)]).hit
    assert c.compile_cached(tu, tmp_path / "d.o", OPTS90, launcher=[]).hit
    # no launcher given: the environment's, keyed as such
    monkeypatch.setenv("EXPS_LAUNCHER", str(shim))
    assert c.compile_cached(tu, tmp_path / "e.o", OPTS90).key == via.key
    # the same launcher elsewhere is the same; another name or other arguments are not
    (tmp_path / "elsewhere").mkdir()
    moved = shutil.copy(shim, tmp_path / "elsewhere" / "launch.sh")
    assert c.key_for(tu, OPTS90, launcher=[moved]) == via.key
    assert c.key_for(tu, OPTS90, launcher=[str(tmp_path / "other.sh")]) != via.key
    assert c.key_for(tu, OPTS90, launcher=[str(shim), "-x"]) != via.key


def test_prune_counts_the_ptx_entries_of_older_caches(tmp_path):
    c = oc.ObjectCache(tmp_path / "d", max_bytes=10 ** 9)
    c.put("0a" + "1" * 62, b"x" * 100, {})
    c.put("0a" + "1" * 62, b"y" * 5000, {}, ".ptx")   # an entry older versions kept beside an object
    c.max_bytes = 0
    assert c.prune() == 2 and not list((tmp_path / "d").rglob("*.*"))
