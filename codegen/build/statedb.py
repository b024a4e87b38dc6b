"""doit's dependency file (`<build>/.doit.db`): checked before doit opens it, its save guarded.

doit keeps which stages are up to date in a dbm file that it writes once, when a run ends. Two
ways that write goes wrong, and what we do:

- **it fails** (disk full, read-only or vanished build dir; under dbm.sqlite3, Python 3.13's
  default, a full disk is sqlite's SQLITE_FULL, said as a full disk too): doit would print a
  traceback and leave a half-written file. :func:`guard` wraps the save: on failure the file is removed
  (no state is always safe: the next build checks every stage again, the objects come from the
  cache) and :func:`save_error` holds one line that the reporter prints; the build exits 1.
- **it was cut short** (a build killed while saving): the file no longer parses and doit would
  fail at its next start with a traceback. :func:`check` reads the whole file before doit opens
  it and removes it when it does not read back, with a note.

Neither case can place a stale `.so`: the `.so` files are written atomically by their link
stages; this file only decides which stages to skip.
"""
from __future__ import annotations

import dbm
import json
from pathlib import Path

NAME = ".doit.db"
_save_error: str | None = None


def path(build: Path | str) -> Path:
    return Path(build) / NAME


#: the files of a dbm database named NAME: gdbm's the name itself, dbm.dumb's .dat/.dir/.bak, ndbm's .db/.pag
_SUFFIXES = ("", ".dat", ".dir", ".bak", ".db", ".pag")


def _files(dep_file: Path) -> list[Path]:
    return [f for s in _SUFFIXES if (f := dep_file.with_name(dep_file.name + s)).exists()]


def remove(dep_file: Path) -> None:
    for p in _files(dep_file):
        p.unlink(missing_ok=True)


def check(dep_file: Path | str) -> str | None:
    """Read every entry of ``dep_file`` as doit will (dbm, JSON values). If it does not read
    back, remove it and return a note saying so; None when it is absent or sound."""
    dep_file = Path(dep_file)
    if not _files(dep_file):
        return None
    try:
        with dbm.open(str(dep_file), "r") as db:
            for k in db.keys():
                json.loads(db[k])
        return None
    except Exception as e:   # noqa: BLE001 — any way it fails to read back, it is unusable
        why = " ".join(str(e).split())[:120] or type(e).__name__
    remove(dep_file)
    return (f"exps-codegen: note: the build state {dep_file} did not read back ({why}; a build "
            f"killed while saving it?): removed, so this build checks every stage again")


def guard(dep_manager) -> None:
    """Make doit's end-of-run save of ``dep_manager`` fail soft (see the module docstring). The
    file is the backend's own (doit's --db-file if given)."""
    global _save_error
    _save_error = None
    backend = getattr(dep_manager, "backend", None)
    if backend is None:
        return
    dump = backend.dump
    dep_file = Path(backend.name)

    def guarded_dump():
        global _save_error
        try:
            dump()
        except Exception as e:   # noqa: BLE001 — OSError, or sqlite3.Error with --backend sqlite3
            remove(dep_file)
            why = (f"[Errno {e.errno}] {e.strerror}" if isinstance(e, OSError) and e.errno
                   else " ".join(str(e).split()))      # dbm's own file name (bytes) left out
            # dbm.sqlite3 (Python 3.13's default) raises its OSError, no errno, from sqlite's error
            if "SQLITE_FULL" in {getattr(x, "sqlite_errorname", "") for x in (e, e.__cause__, e.__context__)}:
                why = f"No space left on device ({why})"
            _save_error = (f"could not save the build state {dep_file}: {why}; "
                           f"removed, so the next build checks every stage again")

    backend.dump = guarded_dump


def save_error() -> str | None:
    """The failure of the last guarded save, one line; None when it worked."""
    return _save_error
