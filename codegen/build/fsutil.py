"""The package's one atomic writer (style guide rule 4): a temp file in the destination dir,
fsync, `os.replace`; unlinked on any failure. Cache entries, stage files, sources and the `.so`
all go through it. A module of its own so that the toolchain and the cache both use it without
importing each other."""
from __future__ import annotations

import os
import re
import secrets
from pathlib import Path


#: how much of the destination's name a temp file's name keeps
TMP_NAME_MAX = 150


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not; another user's process does)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def remove_stale_temps(path: Path | str) -> list[Path]:
    """Remove the temp files `atomic_write` left beside `path` when its writer was killed (SIGKILL
    between create and rename): `.<name>.<pid>.<12 hex>.tmp` of a pid that no longer runs. A live
    writer's temp file is left alone. Returns what was removed."""
    path = Path(path)
    pat = re.compile(re.escape("." + path.name[:TMP_NAME_MAX]) + r"\.(\d+)\.[0-9a-f]{12}\.tmp")
    gone = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return gone
    for n in names:
        m = pat.fullmatch(n)
        if m and int(m[1]) != os.getpid() and not pid_alive(int(m[1])):
            try:
                os.unlink(path.parent / n)
                gone.append(path.parent / n)
            except FileNotFoundError:
                pass
    return gone


def atomic_write(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: temp file beside it, fsync, ``os.replace``.

    The temp name carries the pid and a random suffix (concurrent writers never share one) and
    is unlinked on any failure. The file mode follows the umask (not mkstemp's 0600). This is the
    package's only atomic writer: cache entries, build outputs and the ``.so`` all use it.
    """
    path = Path(path)
    tmp = path.parent / f".{path.name[:TMP_NAME_MAX]}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
