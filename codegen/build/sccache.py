"""sccache as the compiler launcher (`launcher=sccache`, `EXPS_LAUNCHER=sccache`; docs/BUILD-FARM.md).

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
- :func:`split_fatbin`: sccache (0.16) fails a ``-fatbin`` compile of two or more virtual archs
  at random (``Failed to open file for hashing: <tu>.module_id``: the first arch's cicc writes that
  file and the others read it, but sccache runs the archs' steps in a hash map's order; 4 of 8
  compiles failed for sm_80 + sm_90, 7 of 8 for arch=major). So such a compile runs as one
  ``-fatbin`` compile per virtual arch through sccache (in parallel: on as many build servers),
  each keeping its cubin and PTX (``--keep``), and ``fatbinary`` here assembles them as nvcc's own
  ``--dryrun`` of the whole compile says: the same images (cicc's module id is a digest of the
  TU, the same in every compile of it), the same command, the same bytes.
- :func:`stats`: sccache's counters (``sccache --show-stats --stats-format json``).

A link never goes through sccache: it neither caches nor distributes one (toolchain.link_shared).
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

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


#: where the compile of one virtual arch keeps its cubin and PTX, in the work dir
SPLIT_DIR = "exps_arch_{}"
_GENCODE = re.compile(r"arch=compute_(\d+),code=(?:sm|compute)_(\d+)")
_IMAGE = re.compile(r"--image3=kind=(elf|ptx),sm=(\d+),file=(.+)")


def virtual_archs(argv: Sequence[str]) -> list[str]:
    """The virtual archs (``compute_<n>`` numbers) of argv's ``-gencode`` pairs, in order."""
    out: list[str] = []
    for i, a in enumerate(argv[:-1]):
        if a == "-gencode" and (m := _GENCODE.fullmatch(argv[i + 1])) and m[1] not in out:
            out.append(m[1])
    return out


#: run(what, argv, output name) -> (merged stdout+stderr, seconds): toolchain's nvcc runner
Runner = Callable[[str, list[str], str], tuple[str, float]]


def split_fatbin(argv: list[str], n_launcher: int, work: str, run: Runner,
                 env: Mapping[str, str]) -> tuple[str, float] | None:
    """The ``-fatbin`` compile `argv` (launcher first, `n_launcher` words; ``-o <name>`` last) as
    one compile per virtual arch through the launcher and ``fatbinary`` here (module doc), in
    `work` (the cwd). Returns what `run` returns for the whole, or None when nvcc's dry run
    does not name what this needs (the caller then runs nvcc without the launcher)."""
    archs = virtual_archs(argv)
    out_name = argv[-1]
    gen = [i for i, a in enumerate(argv) if a == "-gencode"]
    if not gen or any(i + 1 >= len(argv) or not _GENCODE.fullmatch(argv[i + 1]) for i in gen):
        return None
    base = [a for i, a in enumerate(argv) if i not in gen and i - 1 not in gen]
    at = gen[0] if gen else len(base)
    parts: list[tuple[str, list[str], str]] = []
    for v in archs:
        flags = [w for i in gen if _GENCODE.fullmatch(argv[i + 1])[1] == v for w in ("-gencode", argv[i + 1])]
        keep = SPLIT_DIR.format(v)
        os.mkdir(os.path.join(work, keep))
        av = base[:at] + flags + ["--keep", "--keep-dir", keep] + base[at:-1] + [f"{keep}.fatbin"]
        parts.append((v, av, f"{keep}.fatbin"))
    # what nvcc would run for the whole compile (a dry run compiles nothing)
    try:
        dry = subprocess.run([*argv[n_launcher:], "--dryrun"], cwd=work, env=dict(env), capture_output=True,
                             text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln[3:] for ln in (dry.stdout + dry.stderr).splitlines() if ln.startswith("#$ ")]
    here = next((ln.split("=", 1)[1] for ln in lines if ln.startswith("_HERE_=")), None)
    fat = [shlex.split(ln) for ln in lines if ln.startswith("fatbinary ")]
    if dry.returncode != 0 or here is None or len(fat) != 1:
        return None
    t0 = time.monotonic()
    with ThreadPoolExecutor(len(parts)) as ex:
        texts = list(ex.map(lambda p: run("nvcc compile", p[1], p[2])[0], parts))
    cmd = [os.path.join(here, "fatbinary")]
    for a in fat[0][1:]:
        m = _IMAGE.fullmatch(a)
        if m:
            got = glob.glob(os.path.join(work, SPLIT_DIR.format(m[2]), "*.cubin" if m[1] == "elf" else "*.ptx"))
            if len(got) != 1:
                return None
            a = f"--image3=kind={m[1]},sm={m[2]},file={os.path.relpath(got[0], work)}"
        elif a.startswith("--create="):
            a = f"--create={out_name}"
        cmd.append(a)
    text, _ = run("fatbinary", cmd, out_name)
    return "".join(texts) + text, time.monotonic() - t0


def stats(launcher: Sequence[str] = (NAME,), env: Mapping[str, str] | None = None) -> dict:
    """The counters of the sccache server (``sccache --show-stats --stats-format json``'s
    ``stats``: ``compile_requests``, ``cache_hits``, ``cache_misses``, ``dist_compiles`` {server:
    count}, ``dist_errors``, ...)."""
    p = subprocess.run([launcher[0], "--show-stats", "--stats-format", "json"], env=env,
                       capture_output=True, text=True, timeout=60, check=True)
    return json.loads(p.stdout)["stats"]
