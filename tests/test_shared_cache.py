"""Building on several machines: two "machines" (own build dir, own object cache, own
local ccache) share one ccache remote store (its `file:` backend); the second cold build runs no
real compile (ccache caches our `-c -fatbin` device compiles and the host compiles alike). Builds are reproducible (two cold builds in different dirs and caches give
byte-identical `.so` files), so `exps-codegen verify --rebuild` can tell a placed `.so` that a local
compile would not make."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

import buildkit as bk

pytestmark = pytest.mark.requires("nvcc", "ccache")

REAL_NVCC = """#!/bin/sh
# counts the compiles that really run (ccache calls the compiler only on a miss)
case " $* " in *" -c "*) echo "compile $*" >> {log} ;; esac
exec {nvcc} "$@"
"""


def _machine(root: Path, name: str, remote: Path, nvcc: Path, key_from: Path | None = None) -> tuple[Path, dict]:
    m = root / name
    pk = bk.copy_key(m / "pk", (bk.TINY, bk.SHARED1, bk.SHARED2))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPS_", "CCACHE_"))}
    # sloppiness: our TUs are written by `emit` a moment before `cc` compiles them; without it
    # ccache takes them as "too new" for its direct mode (README "Building on several machines")
    env.update({"CCACHE_DIR": str(m / "ccache"), "CCACHE_REMOTE_STORAGE": f"file:{remote}",
                "CCACHE_SLOPPINESS": "include_file_mtime,include_file_ctime",
                "EXPS_NVCC": str(nvcc), "EXPS_CACHE_DIR": str(m / "exps-cache"),
                "EXPS_BUILD_ROOT": str(m / "builds"), "EXPS_LAUNCHER": "ccache", "EXPS_LINK_CACHE": "0"})
    return pk, env


def _build(pk: Path, env: dict) -> subprocess.CompletedProcess:
    p = subprocess.run([*bk.exps_codegen(), "build", str(pk), "--arch", "90", "--chunk", "0"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return p


def _ccache_stats(env: dict) -> str:
    return subprocess.run(["ccache", "-s"], env=env, capture_output=True, text=True).stdout


def test_two_machines_share_one_remote_ccache(tmp_path: Path) -> None:
    import shutil
    log = tmp_path / "real-compiles.log"
    wrapper = tmp_path / "bin" / "nvcc"       # named nvcc: ccache recognizes the compiler by name
    wrapper.parent.mkdir()
    wrapper.write_text(REAL_NVCC.format(log=log, nvcc=shutil.which("nvcc")))
    wrapper.chmod(0o755)
    remote = tmp_path / "remote"
    pk_a, env_a = _machine(tmp_path, "a", remote, wrapper)
    pk_b, env_b = _machine(tmp_path, "b", remote, wrapper)

    _build(pk_a, env_a)
    compiled = [next(a for a in line.split() if a.endswith((".cu", ".cpp"))).rsplit("/", 1)[-1]
                for line in log.read_text().splitlines()]
    first = len(compiled)
    # Tiny and the Shared kernel: one device TU of its own and one launch table each, the
    # generic inverse kernel's TU (the same text in both: once, the other kernel's an object-cache
    # hit), the generic launcher (once; twice if both kernels' cc missed it at the same moment), and
    # the device prelude's probe, with and without it (build/prelude.py), cold everywhere
    from buildkit import SHARED_KEY, TINY_KEY
    [xinv] = [n for n in compiled if n.endswith("_xinv.cu")]
    assert xinv == "exps_xinv.cu"          # no key in its name: the same launcher entry for every kernel
    assert set(compiled) == {f"{k}_{t}" for k in (TINY_KEY, SHARED_KEY) for t in ("q0_x0.cu", "abi.cpp")} \
        | {xinv, "exps_runtime.cpp", "exps_prelude_probe.cu"} and first in (8, 9), compiled
    assert compiled.count("exps_prelude_probe.cu") == 2
    assert all(" -fatbin " in line for line in log.read_text().splitlines() if ".cu " in line)
    assert remote.is_dir() and any(remote.iterdir())

    _build(pk_b, env_b)          # another build dir, empty object cache, empty local ccache
    again = [next(a for a in line.split() if a.endswith((".cu", ".cpp"))).rsplit("/", 1)[-1]
             for line in log.read_text().splitlines()[first:]]
    # the second machine compiled no code (the prelude's probe too came from the remote): only
    # the two launch tables (data: each embeds its fatbins by .incbin, which no launcher sees, so
    # they never go through one; ~10 ms each)
    assert sorted(again) == sorted(f"{k}_abi.cpp" for k in (TINY_KEY, SHARED_KEY)), again
    stats = _ccache_stats(env_b)
    remote_hits = re.search(r"Remote storage:\s*\n\s*Hits:\s*(\d+)", stats)
    assert remote_hits and int(remote_hits[1]) >= 5, stats   # the device TUs, the launcher, the probe
    # both machines placed the same bytes
    for rel in (bk.TINY, bk.SHARED1, bk.SHARED2):
        assert bk.so_path(pk_a, rel).read_bytes() == bk.so_path(pk_b, rel).read_bytes(), rel


def test_cold_builds_are_reproducible_and_verify_rebuild_checks_it(tmp_path: Path) -> None:
    """Two cold builds (different build dirs, object caches, key locations, no launcher) place
    byte-identical .so files; `verify --rebuild` says identical, and DIFFERS for a tampered one."""
    envs, keys = [], []
    for i in range(2):
        pk = bk.copy_key(tmp_path / f"m{i}" / "pk", (bk.TINY,))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPS_", "CCACHE_"))}
        env.update({"EXPS_CACHE_DIR": str(tmp_path / f"m{i}" / "cache"),
                    "EXPS_BUILD_ROOT": str(tmp_path / f"m{i}" / "builds"), "EXPS_LINK_CACHE": "0"})
        _build(pk, env)
        envs.append(env)
        keys.append(pk)
    a, b = (bk.so_path(k, bk.TINY).read_bytes() for k in keys)
    assert a == b
    v = subprocess.run([*bk.exps_codegen(), "verify", str(keys[0]), "--rebuild", "--arch", "90", "--chunk", "0"],
                       env=envs[0], capture_output=True, text=True, timeout=600)
    assert v.returncode == 0, v.stdout + v.stderr
    assert re.search(rf"^{re.escape(bk.TINY)}\s+identical \(sha256 [0-9a-f]{{16}}\)$", v.stdout, re.M), v.stdout
    assert v.stdout.splitlines()[-1] == "1 AIRs, 0 differ"
    so = bk.so_path(keys[0], bk.TINY)
    data = bytearray(so.read_bytes())
    data[-100] ^= 1                                   # a .so that no local compile makes
    so.write_bytes(bytes(data))
    v = subprocess.run([*bk.exps_codegen(), "verify", str(keys[0]), "--rebuild", "--arch", "90", "--chunk", "0"],
                       env=envs[0], capture_output=True, text=True, timeout=600)
    assert v.returncode == 1 and f"{bk.TINY}  DIFFERS: sha256" in v.stdout, v.stdout
