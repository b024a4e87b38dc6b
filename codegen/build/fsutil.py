"""The package's one atomic writer (style guide rule 4): a temp file in the destination dir,
fsync, `os.replace`; unlinked on any failure. Cache entries, stage files, sources and the `.so`
all go through it. A module of its own so that the toolchain and the cache both use it without
importing each other."""
from __future__ import annotations

import os
import secrets
from pathlib import Path


def atomic_write(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: temp file beside it, fsync, ``os.replace``.

    The temp name carries the pid and a random suffix (concurrent writers never share one) and
    is unlinked on any failure. The file mode follows the umask (not mkstemp's 0600). This is the
    package's only atomic writer: cache entries, build outputs and the ``.so`` all use it.
    """
    path = Path(path)
    tmp = path.parent / f".{path.name[:150]}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
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
