"""User mistakes caught before anything runs or is created: one line, exit code 2.

Both front ends (`exps-codegen`, cli.py, and `doit` with our dodo.py) call :func:`check` before
they take the build lock or create the build dir, and print a :class:`UserError` as
``exps-codegen: error: <what is wrong and what to do>``. The table of mistakes, their lines and
exit codes is in docs/USAGE.md (tests/test_mistakes.py runs each one).
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from codegen.build import knobs
from codegen.build import toolchain
from codegen.discover import UnusableKeyError, scan, shown

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
PREFIX = "exps-codegen: error: "
#: below this a build cannot even write its stage files and doit's database
MIN_FREE_BYTES = 1 << 20


class UserError(Exception):
    """A mistake of the user's (path, arch, missing tool, variable): printed as one line."""


def one_line(msg: str) -> str:
    return " ".join(str(msg).split())


def fail(e: BaseException, out=None) -> int:
    """Print a UserError (or a ToolchainError) as one line; return the exit code."""
    out = out or sys.stderr
    out.write(PREFIX + one_line(str(e)) + "\n")
    out.flush()
    return EXIT_USAGE


def check_key(pk) -> int:
    """The provingKey directory exists, is usable and holds at least one AIR; returns the number
    of AIRs (placements + refused + stale `.so` files) found."""
    p = Path(pk)
    try:
        sc = scan(p)
    except UnusableKeyError as e:
        raise UserError(f"{e}: rename it (or a link to it) with UTF-8 characters") from None
    except FileNotFoundError:
        what = "is not a directory" if p.exists() else "does not exist"
        raise UserError(f"provingKey {shown(p)} {what}: give the directory that holds the "
                        "<base>.starkinfo.json files (pk=DIR / exps-codegen build DIR)") from None
    except PermissionError as e:
        raise UserError(f"cannot read the provingKey {shown(p)}: {e.strerror}") from None
    n = len(sc.placements) + len(sc.refused) + len(sc.broken)
    if n == 0:
        raise UserError(f"no AIRs found under {shown(p)}: expected <base>.starkinfo.json files, "
                        "each with a sibling <base>.expressionsinfo.json")
    return n


def check_key_writable(pk) -> None:
    """Every folder of the key that gets a `.so` can be written (not a read-only file system, not
    another user's): one line naming the first such folder, before anything runs."""
    sc = scan(Path(pk))
    dirs = sorted({Path(p.so_path).parent for p in sc.placements} | {Path(b.so_path).parent for b in sc.broken})
    bad = [d for d in dirs if not os.access(d, os.W_OK)]
    if not bad:
        return
    try:
        ro = bool(os.statvfs(bad[0]).f_flag & os.ST_RDONLY)
    except OSError:
        ro = False
    why = "is on a read-only file system" if ro else "is not writable (permission denied)"
    more = f" (and {len(bad) - 1} other folder(s) of it)" if len(bad) > 1 else ""
    raise UserError(f"cannot place the .so files: {shown(bad[0])}{more} {why}; build a writable copy of "
                    "the provingKey, or write the sources only (exps-codegen emit / doit emit)")


def check_toolchain(arch: str) -> tuple[list[int], str]:
    """nvcc is there and the arch spec names archs it supports; returns (archs, a note or "")."""
    try:
        nvcc = toolchain.find_nvcc()
    except toolchain.ToolchainError as e:
        raise UserError(str(e)) from None
    try:
        supported = toolchain.supported_archs(nvcc)
        archs = toolchain.resolve_archs(arch, nvcc)
    except toolchain.ToolchainError as e:
        msg = str(e).splitlines()[0]
        if "supported:" not in msg:
            msg += f" (this nvcc supports: {', '.join(map(str, supported))})"
        raise UserError(f"arch={arch}: {msg}") from None
    note = ""
    if arch.strip().lower() == "auto" and not toolchain.detect_gpu_archs():
        note = "exps-codegen: " + toolchain.NO_GPU_NOTE
    return archs, note


def check_build_dir(build) -> None:
    """The build dir exists and is writable, or can be created: it is created here, last, after
    every other check passed (so a mistake creates nothing)."""
    d = Path(build)
    probe = d
    while not probe.exists() and not probe.is_symlink() and probe.parent != probe:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise UserError(f"build dir {shown(d)}: {shown(probe)} is not a directory; "
                        "choose another with build=DIR / --build-dir DIR")
    try:
        d.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=d):
            pass
        st = os.statvfs(d)
    except OSError as e:
        raise UserError(f"cannot create the build dir {shown(d)}: {e.strerror or e}; "
                        "choose another with build=DIR / --build-dir DIR") from None
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE_BYTES:
        raise UserError(f"build dir {shown(d)}: only {free // 1024} KiB free on its file system; "
                        "free some space or choose another with build=DIR / --build-dir DIR")


def check(s, need_nvcc: bool, need_key: bool = True, creates_build_dir: bool = True,
          places: bool = False) -> list[str]:
    """Every check a command needs; returns notes to print (e.g. the no-GPU arch note). `places`:
    the command writes `.so` files into the key (a build)."""
    notes: list[str] = []
    try:
        knobs.read()
    except knobs.KnobError as e:
        raise UserError(str(e)) from None
    if need_key:
        check_key(s.pk)
    if places:
        check_key_writable(s.pk)
    if need_nvcc:
        archs, note = check_toolchain(s.arch)
        s._archs = archs
        if note:
            notes.append(note)
    if creates_build_dir:
        check_build_dir(s.build)
    return notes
