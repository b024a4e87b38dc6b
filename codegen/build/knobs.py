"""Every environment knob exps-codegen reads, read here and nowhere else.

    EXPS_NVCC              nvcc to use: a path or a name on PATH (default: discovery, toolchain.find_nvcc)
    EXPS_LAUNCHER          compiler launcher in front of nvcc, shell-split (ccache, sccache); part
                           of the object cache's key (an object that came through a launcher is
                           never handed to a build without it), never of the placed bytes
    EXPS_CACHE_DIR         object cache root (default ~/.cache/exps-codegen)
    EXPS_CACHE_MAX_BYTES   object cache bound, pruned LRU (default 4G; K/M/G/T suffixes)
    EXPS_LINK_CACHE=0      link every .so instead of reusing a cached link of the same objects
    EXPS_ASSERT_NO_COMPILE=1  any compile or link fails (proves a no-op build compiles nothing)
    EXPS_BUILD_ROOT        where default build dirs go (default $XDG_CACHE_HOME or ~/.cache,
                           then exps-codegen/builds)
    EXPS_HEARTBEAT_S       seconds between the progress lines of a long task (default 30)
    EXPS_DEVICE_PRELUDE=0  device compiles include CUDA's full cuda_runtime.h instead of the
                           device prelude (build/prelude.py: the same bytes, ~0.2 s more a compile)
    NVCC_PREPEND_FLAGS / NVCC_APPEND_FLAGS / NVCC_CCBIN   read by nvcc itself: they change the
                           output, so they are cache-keyed and part of the tasks' toolchain
                           (keyed_env)
    CUDA_HOME / CUDA_PATH  where to look for bin/nvcc after PATH
    EXPS_CUDA_DIRS         where CUDA toolkits are installed, looked at last for bin/nvcc: globs
                           separated by ':' (default /usr/local/cuda:/usr/local/cuda-*:/opt/cuda;
                           empty: none)
    CXX                    the host compiler of the host check (default g++)

`read()` re-reads the environment on every call (tests monkeypatch it); a malformed value raises
KnobError, which the front ends print as one line.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

#: variables nvcc itself reads; they change the output, so they are cache-keyed
KEYED_ENV_VARS: tuple[str, ...] = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN")
DEFAULT_CACHE_MAX_BYTES = 4 << 30
DEFAULT_HEARTBEAT_S = 30.0
#: where the CUDA toolkit's installers put it (of the `cuda-X.Y` dirs the newest first)
DEFAULT_CUDA_DIRS = ("/usr/local/cuda", "/usr/local/cuda-*", "/opt/cuda")


class KnobError(ValueError):
    """An environment knob has a value we cannot use."""


@dataclasses.dataclass(frozen=True)
class Knobs:
    """Snapshot of every environment knob (see the module doc)."""

    nvcc: str | None
    launcher: tuple[str, ...]
    launcher_text: str | None
    cache_dir: Path | None
    cache_max_bytes: int
    assert_no_compile: bool
    keyed_env: Mapping[str, str]
    link_cache: bool = True
    build_root: Path = Path("~/.cache/exps-codegen/builds")
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    cuda_homes: tuple[str, ...] = ()
    cuda_dirs: tuple[str, ...] = DEFAULT_CUDA_DIRS
    cxx: str = "g++"
    device_prelude: bool = True


def parse_bytes(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)i?b?\s*", text, re.I)
    if not m:
        raise KnobError(f"EXPS_CACHE_MAX_BYTES={text!r}: expected e.g. 4000000000, 500M, 4G")
    return int(m[1]) << (10 * " kmgt".index(m[2].lower() or " "))


def _heartbeat(text: str | None) -> float:
    if not text:
        return DEFAULT_HEARTBEAT_S
    try:
        return max(0.05, float(text))
    except ValueError:
        raise KnobError(f"EXPS_HEARTBEAT_S={text!r}: expected seconds, e.g. 30") from None


def _launcher(text: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(text))
    except ValueError as e:
        raise KnobError(f"EXPS_LAUNCHER={text!r}: {e} (a command as a shell would split it, e.g. ccache)") from None


def read(env: Mapping[str, str] | None = None) -> Knobs:
    env = os.environ if env is None else env
    cache_home = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Knobs(
        nvcc=env.get("EXPS_NVCC") or None,
        launcher=_launcher(env.get("EXPS_LAUNCHER", "")),
        launcher_text=env.get("EXPS_LAUNCHER") or None,
        cache_dir=Path(env["EXPS_CACHE_DIR"]).expanduser() if env.get("EXPS_CACHE_DIR") else None,
        cache_max_bytes=parse_bytes(env["EXPS_CACHE_MAX_BYTES"])
        if env.get("EXPS_CACHE_MAX_BYTES") else DEFAULT_CACHE_MAX_BYTES,
        assert_no_compile=env.get("EXPS_ASSERT_NO_COMPILE", "").strip() not in ("", "0"),
        keyed_env={k: env.get(k, "") for k in KEYED_ENV_VARS},
        link_cache=env.get("EXPS_LINK_CACHE", "1").strip() != "0",
        build_root=Path(env.get("EXPS_BUILD_ROOT") or os.path.join(cache_home, "exps-codegen", "builds")).expanduser(),
        heartbeat_s=_heartbeat(env.get("EXPS_HEARTBEAT_S")),
        cuda_homes=tuple(env[v] for v in ("CUDA_HOME", "CUDA_PATH") if env.get(v)),
        cuda_dirs=DEFAULT_CUDA_DIRS if env.get("EXPS_CUDA_DIRS") is None
        else tuple(x for x in env["EXPS_CUDA_DIRS"].split(":") if x),
        cxx=env.get("CXX") or "g++",
        device_prelude=env.get("EXPS_DEVICE_PRELUDE", "1").strip() != "0",
    )


@contextlib.contextmanager
def overridden(**values: str | None):
    """Set (or, with None, unset) knobs for the block, then restore them (`verify --rebuild`
    builds with a private cache and no launcher)."""
    def put(items) -> None:
        for k, v in items:
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    saved = [(k, os.environ.get(k)) for k in values]
    try:
        put(values.items())
        yield
    finally:
        put(saved)
