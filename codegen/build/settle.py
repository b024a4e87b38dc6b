"""The state of each placed `.so` against the AIR's files on disk now (`so_state`: the one
comparison `status`, the summary and the end-of-build check make), and the end-of-build check
that removes every `.so` a build leaves stale (`settle`).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from codegen import EMITTER_VERSION
from codegen.build import actions
from codegen.discover import Placement, Scan, scan, shown
from codegen.emit import NotRegularError, open_so, read_so_identity, source_hash

if TYPE_CHECKING:
    from codegen.tasks import Settings


def so_state(s: Settings, p: Placement) -> tuple[str, str]:
    """What the AIR's placed `.so` is against its files on disk now: ("current", ""), ("missing",
    "") or ("stale", why). Current means it carries the identity (emitter version, source hash)
    a build of the AIR's present bytes with these settings embeds. Only lstat, and a read of a
    regular file (emit.open_so: never a FIFO or a device)."""
    if not os.path.lexists(p.so_path):
        return "missing", ""
    try:
        open_so(p.so_path).close()
    except NotRegularError as e:
        return "stale", f"its .so {e.strerror}"
    except OSError as e:
        return "stale", f"its .so cannot be read: {e.strerror or e}"
    ident = read_so_identity(p.so_path)
    if ident is None:
        return "stale", "its .so carries no identity of ours"
    if p.error:
        return "stale", "its inputs are no longer usable"
    if ident[0] != EMITTER_VERSION:
        return "stale", f"its .so is of emitter {ident[0]} (this is {EMITTER_VERSION})"
    if ident[1] != source_hash(p.content, s.hashed()):
        return "stale", "its .so was built from other JSON or settings"
    return "current", ""


def settle(s: Settings, sc: Scan | None = None) -> list[tuple[str, str]]:
    """After a build: every placed `.so` that is not current for the files on disk now (a JSON
    edited while the build ran, whatever the moment) is removed, so the key holds the `.so` of
    what is on disk or none; so is the `.so` of an AIR whose files became unusable while the
    build ran (one found so when the build started had its `gone` task). Returns [(AIR, why)] of
    those AIRs (the next build makes them). `sc`: the key's scan after the build, when at hand."""
    out = []
    sc = sc or scan(s.pk)
    stale = [(shown(p.rel), p.so_path, why) for p in sc.placements
             for state, why in [so_state(s, p)] if state == "stale"]
    stale += [(b.rel, b.so_path, b.reason) for b in sc.broken]
    for air, so, why in stale:
        try:
            actions.remove_so([str(so)])
            out.append((air, f"{why}: removed (its files changed during the build; rerun)"))
        except OSError as e:
            out.append((air, f"{why}, and it cannot be removed: {e.strerror or e}"))
    return out
