"""sccache as the compiler launcher (`launcher=sccache`, `EXPS_LAUNCHER=sccache`; README "Build farm").

sccache runs `nvcc --dryrun` and then nvcc's steps itself: the host preprocessor and `fatbinary`
on this machine, cicc, ptxas and the host compiler through its cache (local dir, Redis, S3,
WebDAV) and, with a `[dist]` config, on the build servers of an `sccache-dist` scheduler. What
that needs from us, and nothing else, is here:

- :func:`start_server`: sccache's first client call starts its server (a daemon) with that call's
  environment, and a compile's environment holds ``TMPDIR=<its work dir>``, removed when the
  compile ends: the server would keep its temp files there and every later compile would fail
  ("No such file or directory", then a panic). So the server is started once per process, before
  the first compile through it, from the process's own environment.
- :func:`workdir_name`: cicc's command line holds the real path of the TU
  (``--orig_src_path_name``) and sccache keys cicc on its command line, so a TU compiled in a
  fresh random work dir would never find its PTX in the cache (ptxas, keyed on the PTX, would).
  A compile through sccache runs in a work dir named by its TU and flags instead, with the TU and
  its headers copied in (not linked: nvcc resolves a link to the build dir), so its path is the
  same on every machine with the same temp root (``/tmp`` by default).
- :func:`stats`: sccache's counters (``sccache --show-stats --stats-format json``).

A link never goes through sccache: it neither caches nor distributes one (toolchain.link_shared).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
from collections.abc import Mapping, Sequence

#: the launcher's program name that turns this support on
NAME = "sccache"
#: a compile's work dir through sccache: ``<safe temp root>/exps-sccache-<workdir_name()>``
WORKDIR_PREFIX = "exps-sccache-"
#: in such a work dir: the pid of the process that made it (toolchain.reap_stale_workdirs)
OWNER_FILE = ".exps-owner"
#: the server environment variables that pick which sccache server a client talks to
SERVER_VARS = ("SCCACHE_SERVER_PORT", "SCCACHE_SERVER_UDS")

_started: set[tuple[str, ...]] = set()
_start_lock = threading.Lock()


def is_sccache(launcher: Sequence[str] | None) -> bool:
    """Whether `launcher` (an argv prefix) runs sccache."""
    return bool(launcher) and os.path.basename(launcher[0]) == NAME


def start_server(launcher: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    """Start the sccache server of `launcher` once per process and server address, from this
    process's environment (see the module doc). One already running is left as it is
    (`--start-server` answers "Address in use"); any other failure shows at the first compile."""
    env = dict(os.environ if env is None else env)
    env.pop("SCCACHE_NO_DAEMON", None)      # set, `--start-server` would run the server itself
    tag = (launcher[0], *(env.get(v, "") for v in SERVER_VARS))
    with _start_lock:
        if tag in _started:
            return
        try:
            subprocess.run([launcher[0], "--start-server"], env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass                    # the compile runs the launcher again and reports what fails
        _started.add(tag)


def workdir_name(tu_name: str, tu_bytes: bytes, flags: Sequence[str]) -> str:
    """The name (after :data:`WORKDIR_PREFIX`) of the work dir of one compile through sccache:
    a digest of the TU's name, its text and the flags, the same on every machine."""
    h = hashlib.sha256(json.dumps([tu_name, hashlib.sha256(tu_bytes).hexdigest(), list(flags)]).encode())
    return h.hexdigest()[:24]


def stats(launcher: Sequence[str] = (NAME,), env: Mapping[str, str] | None = None) -> dict:
    """The counters of the sccache server (``sccache --show-stats --stats-format json``'s
    ``stats``: ``compile_requests``, ``cache_hits``, ``cache_misses``, ``dist_compiles`` {server:
    count}, ``dist_errors``, ...)."""
    p = subprocess.run([launcher[0], "--show-stats", "--stats-format", "json"], env=env,
                       capture_output=True, text=True, timeout=60, check=True)
    return json.loads(p.stdout)["stats"]
