"""Walk a provingKey: AIRs, phases, kernel syms, placements and kernel keys (spec §6, design.md).

An AIR is a `<base>.starkinfo.json` with a sibling `<base>.expressionsinfo.json`. Discovery reads
only the (small) starkinfo and hashes the expressionsinfo bytes: cheap enough for doit load time.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from .model import ModelError, StarkInfo, load_json, parse_starkinfo, printable

log = logging.getLogger("exps_codegen")
SAFE_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,120}")   # used with fullmatch
STARKINFO = ".starkinfo.json"
EXPRS = ".expressionsinfo.json"


def phase_of(air_dir: Path) -> str:
    leaf = air_dir.name
    if leaf == "air":
        return "basic"
    if leaf in ("recursive1", "recursive2"):
        return "recursive"
    if leaf.startswith("vadcop_final"):
        return "final"
    return leaf


KEY_MAX = 200


def _c_ident(s: str) -> str:
    """A C identifier for `s` (kernel keys and syms name C symbols and build files): other characters
    become `_`, a leading digit gets a `k` prefix, and a name over KEY_MAX characters is cut and
    suffixed with a digest of the whole (so it stays unique and below NAME_MAX)."""
    t = re.sub(r"[^A-Za-z0-9_]", "_", s)
    if not t or t[0].isdigit():
        t = "k" + t
    if len(t) > KEY_MAX:
        t = f"{t[:KEY_MAX - 9]}_{hashlib.sha256(s.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}"
    return t


@dataclass(frozen=True)
class Placement:
    """One AIR of the key: where its `.so` goes and which kernel it uses."""

    rel: str                 # AIR path relative to the key, without suffix: "<dir>/<base>"
    air_dir: Path
    base: str
    phase: str
    sym: str
    starkinfo: Path
    expressions: Path
    content: str             # digest of what the kernel is built from
    key: str = ""            # kernel key (sym, or sym + content digest on a collision)
    error: str = ""          # discovery-time error (bad starkinfo): the AIR is skipped

    @property
    def so_path(self) -> Path:
        return self.air_dir / f"{self.base}.exps.so"


def _file_digest(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _si_identity(si: StarkInfo) -> str:
    fields = {k: v for k, v in si.__dict__.items() if k not in ("file", "name")}
    return hashlib.sha256(repr(sorted(fields.items())).encode()).hexdigest()


def find_airs(pk: Path) -> list[tuple[Path, str]]:
    """(air_dir, base) for every starkinfo with a sibling expressionsinfo, sorted; symlinks that
    leave the key are not followed."""
    pk = pk.resolve()
    out = []
    for dirpath, dirnames, filenames in os.walk(pk, followlinks=False):
        dirnames.sort()
        d = Path(dirpath)
        for fn in sorted(filenames):
            if not fn.endswith(STARKINFO):
                continue
            base = fn[: -len(STARKINFO)]
            sib = d / (base + EXPRS)
            # regular files only (following links): a FIFO would block the read, a symlink loop
            # or a dangling link would raise
            if not ((d / fn).is_file() and sib.is_file()):
                continue
            real = (d / fn).resolve()
            if not (real.is_relative_to(pk) and sib.resolve().is_relative_to(pk)):
                log.warning("skipping %s: a symlink leads out of the provingKey", d / fn)
                continue
            out.append((d, base))
    return out


def discover(pk: str | Path) -> list[Placement]:
    """All placements of the key with their kernel keys assigned."""
    if not Path(pk).is_dir():
        raise FileNotFoundError(f"provingKey directory not found: {printable(pk)}")
    pk = Path(pk).resolve()
    places = []
    for air_dir, base in find_airs(pk):
        si_path, ex_path = air_dir / (base + STARKINFO), air_dir / (base + EXPRS)
        rel = str((air_dir / base).relative_to(pk))
        phase = phase_of(air_dir)
        err, sym, content = "", _c_ident(f"{phase}_{base}"), ""
        if not SAFE_NAME.fullmatch(base):       # (match: `$` would accept a trailing newline)
            err = f"{si_path}: file name {base!r} has characters outside [A-Za-z0-9_.+-]"
        else:
            try:
                si = parse_starkinfo(load_json(si_path), si_path)
                sym = _c_ident(f"{phase}_a{si.airgroup_id}_{si.air_id}_b{si.n_bits}_e{si.cexp_id}")
                content = hashlib.sha256((_si_identity(si) + _file_digest(ex_path)).encode()).hexdigest()
            except ModelError as e:
                err = str(e)
            except OSError as e:                  # the expressionsinfo vanished / is unreadable
                err = f"{printable(ex_path)}: cannot read: {e.strerror or e}"
        places.append(Placement(rel, air_dir, base, phase, sym, si_path, ex_path, content, error=err))
    return assign_keys(places)


def assign_keys(places: list[Placement]) -> list[Placement]:
    """Kernel key = sym; AIRs that share a sym but not the content get `sym_<digest8>` (warned)."""
    by_sym: dict[str, set[str]] = {}
    for p in places:
        if not p.error:
            by_sym.setdefault(p.sym, set()).add(p.content)
    out = []
    for p in places:
        if p.error:
            out.append(replace(p, key=_c_ident(p.rel)))
            continue
        if len(by_sym[p.sym]) > 1:
            key = f"{p.sym}_{p.content[:8]}"
            log.warning("sym %s is shared by AIRs with different expressions; %s gets kernel %s",
                        p.sym, p.rel, key)
        else:
            key = p.sym
        out.append(replace(p, key=key))
    return out


def kernels(places: list[Placement]) -> dict[str, list[Placement]]:
    """kernel key -> its placements (in discovery order)."""
    out: dict[str, list[Placement]] = {}
    for p in places:
        out.setdefault(p.key, []).append(p)
    return out
