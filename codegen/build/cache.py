"""Content-addressed object cache, and the package's one atomic file writer.

An entry is one file ``<root>/<kk>/<key>.obj``::

    EXPS-OBJCACHE <CACHE_FORMAT>\\n
    <sha256 hex of the payload>\\n
    payload = <header JSON, one line>\\n<object bytes>

The header holds the key, the object's size and the ptxas report. A read re-checks format, digest,
key and size; anything off is a miss and the entry is removed (reads fail soft). Writes go
through :func:`atomic_write`, so concurrent writers of one key never expose a partial entry: the
last ``os.replace`` wins, and same key means same bytes.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from codegen.build import toolchain as _tc
from codegen.build.fsutil import atomic_write  # noqa: F401 (re-exported: cache.atomic_write)

log = logging.getLogger(__name__)

#: Bumped whenever the entry layout or the key recipe changes; part of every key.
CACHE_FORMAT = "exps-objcache-4"
_MAGIC = f"EXPS-OBJCACHE {CACHE_FORMAT}\n".encode()
_TMP_MAX_AGE_S = 3600.0
_WARNED: set[tuple[str, int | None]] = set()   # (cache root, errno) already warned about
#: (cache root, key) -> the lock its compile holds in this process: a build's threads (doit -n,
#: compile_tus) that want the same object (identical TUs of two AIRs: their kernels are named by
#: content) compile it once; the others wait and take the entry
_INFLIGHT: dict[tuple[str, str], threading.Lock] = {}
_INFLIGHT_GUARD = threading.Lock()
#: cache root -> the bytes of its entries after this process's last scan (`prune`) plus what this
#: process stored there since: a put scans the cache again only when that passes max_bytes (a scan
#: stats every entry: at a few thousand entries, 20 ms a put, a second and more of a build). A
#: process's first put scans; what other processes store meanwhile is seen at the next scan.
_USAGE: dict[str, int] = {}
_USAGE_GUARD = threading.Lock()


def launcher_identity(launcher: Sequence[str]) -> str:
    """What of a compiler launcher keys the objects made through it: its program's name and its
    arguments (`ccache`, `/usr/bin/ccache` and `ccache` on another machine are one; no launcher is
    ""). Not the program's path: caches move between machines and checkouts with it."""
    argv = list(launcher)
    return json.dumps([os.path.basename(argv[0]), *argv[1:]]) if argv else ""


def _inflight(root: Path, key: str) -> threading.Lock:
    with _INFLIGHT_GUARD:
        return _INFLIGHT.setdefault((str(root), key), threading.Lock())


def _sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


@functools.lru_cache(maxsize=64)
def _includes(text: str) -> tuple[str, ...]:
    """The quoted ``#include`` names of a header's text, memoized: every device TU of a build
    includes the same ~70 KB gen_common.cuh, which a scan took ~0.5 ms to read twice and search."""
    return tuple(_INCLUDE.findall(text))


def scan_headers(tu_path: Path, include_dirs: Sequence[Path] = ()) -> dict[str, str]:
    """Texts of the quoted ``#include``s a TU reaches (recursively), keyed by the included name.

    Resolved like nvcc does for quotes: the including file's dir, then ``include_dirs``.
    Names that resolve nowhere (system headers) are skipped. Each file is read once.
    """
    found: dict[str, str] = {}
    todo = [(Path(tu_path), Path(tu_path).read_text(errors="replace"), False)]
    while todo:
        src, text, header = todo.pop()
        for name in (_includes(text) if header else _INCLUDE.findall(text)):
            if name in found:
                continue
            for d in (src.parent, *map(Path, include_dirs)):
                if (d / name).is_file():
                    found[name] = (d / name).read_text(errors="replace")
                    todo.append((d / name, found[name], True))
                    break
    return found


@dataclasses.dataclass
class CachedCompile:
    """Outcome of :meth:`ObjectCache.compile_cached`; ``result`` is None on a hit."""

    obj_path: Path
    report: dict
    hit: bool
    key: str
    result: _tc.CompileResult | None


class ObjectCache:
    """Object cache under ``root`` (default ``$EXPS_CACHE_DIR`` or ``~/.cache/exps-codegen``)."""

    def __init__(self, root: Path | str | None = None, max_bytes: int | None = None) -> None:
        k = _tc.knobs()
        self.root = Path(root) if root is not None else (
            k.cache_dir or Path.home() / ".cache" / "exps-codegen")
        self.max_bytes = k.cache_max_bytes if max_bytes is None else max_bytes
        self.hits = 0
        self.misses = 0
        self.put_errors = 0

    # -- keys -------------------------------------------------------------------------------
    @staticmethod
    def key(tu_text: str, header_texts: Mapping[str, str], nvcc_version_text: str,
            flags: Sequence[str], env: Mapping[str, str],
            inputs: Mapping[str, bytes] | None = None, launcher: Sequence[str] = (),
            host_compiler_text: str = "") -> str:
        """sha256 over named parts (each logged at DEBUG). Flags keep their order (nvcc's
        argv is positional: ``-Xptxas -v``); headers, inputs (files the TU reads by name, such as
        the fatbins a launch table embeds) and env are sorted by name. The compiler launcher is a
        part of its own (`launcher_identity`): an object that came through a launcher (whose own
        store may have been written by anyone) is never handed to a build without that launcher.
        `host_compiler_text` names the host compiler nvcc calls (toolchain.host_compiler_text)."""
        parts = [
            ("format", CACHE_FORMAT),
            ("tu", tu_text),
            ("headers", json.dumps({n: _sha(t) for n, t in sorted(header_texts.items())})),
            ("inputs", json.dumps({n: _sha(b) for n, b in sorted((inputs or {}).items())})),
            ("nvcc", nvcc_version_text),
            ("host", host_compiler_text),
            ("flags", json.dumps(list(flags))),
            ("env", json.dumps(dict(sorted(env.items())))),
            ("launcher", launcher_identity(launcher)),
        ]
        h = hashlib.sha256()
        for name, text in parts:
            digest = _sha(text)
            log.debug("cache key part %s = %s", name, digest)
            h.update(f"{name}={digest}\n".encode())
        return h.hexdigest()

    def key_for(self, tu_path: Path, opts: _tc.CompileOptions, *,
                include_dirs: Sequence[Path] = (), header_texts: Mapping[str, str] | None = None,
                nvcc: Path | None = None, inputs: Mapping[str, Path] | None = None,
                launcher: Sequence[str] = ()) -> str:
        """The key of compiling ``tu_path`` with ``opts`` through ``launcher`` (headers scanned
        when not given)."""
        nvcc = nvcc or _tc.find_nvcc()
        headers = scan_headers(tu_path, include_dirs) if header_texts is None else header_texts
        if opts.prelude:     # what the compile sees as cuda_runtime.h (toolchain.PRELUDE_DIR)
            headers = {**headers, f"{_tc.PRELUDE_DIR}/cuda_runtime.h": opts.prelude}
        data = {n: Path(p).read_bytes() for n, p in (inputs or {}).items()}
        return self.key(Path(tu_path).read_text(), headers, _tc.nvcc_version(nvcc).text,
                        opts.flags(), _tc.knobs().keyed_env, data, launcher, _tc.host_compiler_text())

    # -- entries ----------------------------------------------------------------------------
    def path(self, key: str, ext: str = ".obj") -> Path:
        return self.root / key[:2] / f"{key}{ext}"

    def get(self, key: str, ext: str = ".obj") -> tuple[bytes, dict] | None:
        """``(object bytes, ptxas report)`` or None; a bad entry is removed. Hits touch mtime."""
        p = self.path(key, ext)
        try:
            blob = p.read_bytes()
        except OSError:
            return None
        try:
            magic, digest, payload = blob[:len(_MAGIC)], blob[len(_MAGIC):len(_MAGIC) + 65], \
                blob[len(_MAGIC) + 65:]
            if magic != _MAGIC or digest != f"{_sha(payload)}\n".encode():
                raise ValueError("bad magic or digest")
            head, _, obj = payload.partition(b"\n")
            meta = json.loads(head)
            if meta["key"] != key or meta["size"] != len(obj) or not isinstance(meta["report"], dict):
                raise ValueError("header mismatch")
        except (ValueError, KeyError, TypeError) as e:
            log.warning("object cache: dropping bad entry %s (%s)", p, e)
            try:
                p.unlink(missing_ok=True)
            except OSError:     # a read-only cache: the entry stays, it is never used
                pass
            return None
        try:
            os.utime(p)  # LRU clock (atime may be off: noatime mounts)
        except OSError:
            pass
        return obj, meta["report"]

    def put(self, key: str, obj: bytes, report: dict, ext: str = ".obj") -> Path | None:
        """Store an entry atomically (concurrent puts of one key are safe), then prune when the
        cache may have grown past ``max_bytes`` (`_USAGE`: the first put of a process always does).

        The cache is an optimization: a put that fails with an OSError (a full disk, ENOSPC /
        EDQUOT; a cache dir without write permission, EACCES / EROFS) is a warning (once per
        cache root and error) and returns None; the build goes on as after a miss."""
        head = json.dumps({"key": key, "size": len(obj), "report": report},
                          sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
        payload = head + b"\n" + obj
        p = self.path(key, ext)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            blob = _MAGIC + f"{_sha(payload)}\n".encode() + payload
            atomic_write(p, blob)
            if self._grown(len(blob)):
                self.prune()
        except OSError as e:
            self.put_errors += 1
            tag = (str(self.root), e.errno)
            if tag not in _WARNED:
                _WARNED.add(tag)
                log.warning("object cache %s: cannot store entries (%s); building without "
                            "caching", self.root, e.strerror or e)
            return None
        return p

    def _grown(self, n: int) -> bool:
        """Count a put of `n` bytes; whether the cache may now be over ``max_bytes`` (or this
        process has not scanned it yet)."""
        with _USAGE_GUARD:
            used = _USAGE.get(str(self.root))
            if used is None:
                return True
            _USAGE[str(self.root)] = used + n
            return used + n > self.max_bytes

    def prune(self) -> int:
        """Remove least-recently-used entries until the total is <= ``max_bytes``; also old
        temp files left by killed writers. Returns the number of files removed."""
        entries: list[tuple[float, int, Path]] = []
        removed = 0
        now = time.time()
        for sub in (self.root.glob("??") if self.root.is_dir() else ()):
            for f in sub.iterdir():
                try:
                    st = f.stat()
                except OSError:
                    continue
                if f.name.endswith(".tmp"):
                    if now - st.st_mtime > _TMP_MAX_AGE_S:
                        f.unlink(missing_ok=True)
                        removed += 1
                elif f.name.endswith((".obj", ".ptx")):
                    entries.append((st.st_mtime, st.st_size, f))
        total = sum(size for _, size, _ in entries)
        for _, size, f in sorted(entries, key=lambda e: (e[0], e[2].name)):
            if total <= self.max_bytes:
                break
            f.unlink(missing_ok=True)
            total -= size
            removed += 1
        with _USAGE_GUARD:
            _USAGE[str(self.root)] = total
        return removed

    # -- compile through the cache ----------------------------------------------------------
    def compile_cached(self, tu_path: Path, out_obj: Path, opts: _tc.CompileOptions, *,
                       include_dirs: Sequence[Path] = (),
                       header_texts: Mapping[str, str] | None = None,
                       launcher: Sequence[str] | None = None, timeout_s: float | None = None,
                       nvcc: Path | None = None, inputs: Mapping[str, Path] | None = None) -> CachedCompile:
        """get -> (miss) :func:`toolchain.compile_object` -> put. A hit writes the cached object
        to ``out_obj`` atomically and returns the cached ptxas report without running nvcc. Two
        threads of this process compiling one key: the second waits for the first, then hits.
        ``launcher`` None means the environment's (:func:`toolchain.launcher_from_env`)."""
        nvcc = nvcc or _tc.find_nvcc()
        launcher = _tc.launcher_from_env() if launcher is None else list(launcher)
        key = self.key_for(tu_path, opts, include_dirs=include_dirs,
                           header_texts=header_texts, nvcc=nvcc, inputs=inputs, launcher=launcher)
        with _inflight(self.root, key):   # one compile per key at a time in this process
            got = self.get(key)
            if got is not None:
                self.hits += 1
                Path(out_obj).parent.mkdir(parents=True, exist_ok=True)
                atomic_write(out_obj, got[0])
                return CachedCompile(Path(out_obj), got[1], True, key, None)
            self.misses += 1
            res = _tc.compile_object(tu_path, out_obj, opts, include_dirs=include_dirs,
                                     launcher=launcher, timeout_s=timeout_s, nvcc=nvcc, inputs=inputs)
            self.put(key, Path(out_obj).read_bytes(), res.report)
            return CachedCompile(res.obj_path, res.report, False, key, res)
