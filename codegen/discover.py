"""Walk a provingKey: AIRs, phases, kernel syms, placements and kernel keys (spec §6, design.md).

An AIR is a `<base>.starkinfo.json` with a sibling `<base>.expressionsinfo.json`, both regular files
(or links to regular files inside the key). Discovery reads only the (small) starkinfo and hashes
the expressionsinfo bytes: cheap enough for doit load time. It also reports (:func:`scan`) the AIRs
it must refuse (paths that are not UTF-8 cannot enter doit's database) and every `<base>.exps.so`
that no valid AIR owns any more (its inputs became a FIFO, a directory, a symlink loop, vanished):
those are stale and get removed. Special files are only ever lstat/stat-ed, never opened.
"""
from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path

from codegen.model import ModelError, StarkInfo, load_json, open_regular, parse_starkinfo, printable

log = logging.getLogger("exps_codegen")
#: an AIR's file base: used with fullmatch. Never "." or ".." nor hidden: a base that does not start
#: with a letter, digit or `_` could name the same path as another AIR's (`d/.` is `d`)
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,119}")
#: kernel keys of AIRs that cannot be built (bad input, an unsafe name): `bad-<digest of the AIR's
#: path>`. A valid AIR's key is a C identifier (`_c_ident`: never a `-`), so the two namespaces
#: are disjoint and a broken AIR can never share a build dir, a task or a `.so` with a valid one
BAD_KEY_PREFIX = "bad-"
STARKINFO = ".starkinfo.json"
EXPRS = ".expressionsinfo.json"
SO = ".exps.so"


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
    with open_regular(p) as f:          # never a FIFO (would block), never a directory
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _si_identity(si: StarkInfo) -> str:
    fields = {k: v for k, v in si.__dict__.items() if k not in ("file", "name")}
    return hashlib.sha256(repr(sorted(fields.items())).encode()).hexdigest()


def content_digest(si: StarkInfo, expressions_sha256: str) -> str:
    """The identity of what an AIR's kernel is built from: its parsed starkinfo (less its file and
    name: AIRs that differ only there share a kernel) and the sha256 of its expressionsinfo bytes.
    Discovery computes it from the files as they are; the `ir` stage from the very bytes it parses,
    and that is the identity the `.so` embeds (so an edit during a build can never lend the old
    kernel the new files' identity)."""
    return hashlib.sha256((_si_identity(si) + expressions_sha256).encode()).hexdigest()


class UnusableKeyError(Exception):
    """The provingKey itself cannot be used (e.g. its path is not valid UTF-8): one line."""


@dataclass(frozen=True)
class Broken:
    """A `<base>.exps.so` under the key that no valid placement owns any more: its AIR became
    unreadable (starkinfo a FIFO / directory / symlink loop, expressionsinfo gone, ...), was
    refused, or is gone. The `.so` is stale and must be removed (build.act_remove_orphan)."""

    rel: str        # "<dir>/<base>" relative to the key, printable (escaped)
    so_path: Path   # the real path (may hold surrogates: never a doit file_dep/target/name)
    reason: str     # one line, e.g. "was built, now unreadable: starkinfo is a FIFO"


@dataclass(frozen=True)
class Refused:
    """An AIR that cannot be built at all and has no `.so`: its path is not valid UTF-8
    ("refused: path is not valid UTF-8"), or its starkinfo / expressionsinfo is not a readable
    regular file inside the key ("unreadable: starkinfo is a FIFO", "unreadable: expressionsinfo
    is missing", ...; after `build.act_remove_orphan` removed its `.so`, a Broken becomes this)."""

    rel: str        # printable (escaped): two paths may print alike
    reason: str
    path: Path | None = field(default=None, compare=False)   # "<dir>/<base>", the real path


@dataclass(frozen=True)
class Scan:
    """Everything discovery found: the placements to build, AIRs refused, stale `.so` files."""

    placements: list[Placement]
    refused: list[Refused]
    broken: list[Broken]


def shown(s: str | Path) -> str:
    """A path for a one-line message: undecodable bytes as `\\xff`, control characters escaped."""
    t = os.fsencode(str(s)).decode("utf-8", "backslashreplace")
    return printable(t)


def utf8_ok(s: str | Path) -> bool:
    try:
        str(s).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_KIND = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KIND if test(mode)), "not a regular file")


def file_state(p: Path, pk: Path) -> str:
    """'' when `p` is (or links to) a regular file inside the key `pk` (resolved), else why not:
    "is missing", "is a FIFO", "is a directory", "is a symlink loop", "is a dangling symlink",
    "is a symlink to a FIFO", "leads out of the provingKey". Only lstat/stat: never opens."""
    try:
        lst = os.lstat(p)
    except FileNotFoundError:
        return "is missing"
    except OSError as e:
        return f"cannot be read: {e.strerror or e}"
    if stat.S_ISLNK(lst.st_mode):
        try:
            st = os.stat(p)
        except OSError as e:
            return {errno.ELOOP: "is a symlink loop", errno.ENOENT: "is a dangling symlink"}.get(
                e.errno, f"cannot be read: {e.strerror or e}")
        if not stat.S_ISREG(st.st_mode):
            return f"is a symlink to {_kind(st.st_mode)}"
        if not Path(os.path.realpath(p)).is_relative_to(pk):
            return "leads out of the provingKey (symlink)"
        return ""
    if not stat.S_ISREG(lst.st_mode):
        return f"is {_kind(lst.st_mode)}"
    return ""


def _walk(pk: Path) -> tuple[list[tuple[Path, str]], list[Refused], list[Broken]]:
    airs: list[tuple[Path, str]] = []
    refused: list[Refused] = []
    broken: list[Broken] = []
    for dirpath, dirnames, filenames in os.walk(pk, followlinks=False):
        dirnames.sort()
        d = Path(dirpath)
        names = set(filenames) | set(dirnames)          # a directory may be named X.starkinfo.json
        bases = sorted(n[: -len(STARKINFO)] for n in names if n.endswith(STARKINFO))
        for base in bases:
            si, ex, so = d / (base + STARKINFO), d / (base + EXPRS), d / (base + SO)
            rel = shown((d / base).relative_to(pk))
            has_so = os.path.lexists(so) and not os.path.isdir(so)
            why = ""
            for what, path in (("starkinfo", si), ("expressionsinfo", ex)):
                state = file_state(path, pk)
                if state:
                    why = why or f"{what} {state}"
                    if state.startswith("leads out"):
                        log.warning("skipping %s: a symlink leads out of the provingKey", shown(path))
            if why:
                if has_so:
                    broken.append(Broken(rel, so, f"was built, now unreadable: {why}"))
                else:       # still a line in the summary / status (never silently dropped)
                    refused.append(Refused(rel, f"unreadable: {why}", d / base))
                continue
            if not utf8_ok(si):
                reason = "path is not valid UTF-8"
                if has_so:
                    broken.append(Broken(rel, so, f"was built, now refused: {reason}"))
                else:
                    refused.append(Refused(rel, f"refused: {reason}", d / base))
                continue
            airs.append((d, base))
        for n in sorted(filenames):
            if n.endswith(SO) and n[: -len(SO)] not in bases and n[: -len(SO)]:
                base = n[: -len(SO)]
                broken.append(Broken(shown((d / base).relative_to(pk)), d / n,
                                     f"was built, now its AIR is gone: no {shown(base + STARKINFO)}"))
    return airs, refused, broken


def find_airs(pk: Path) -> list[tuple[Path, str]]:
    """(air_dir, base) for every starkinfo with a sibling expressionsinfo, both regular files
    inside the key (symlinks that leave the key are not followed) on UTF-8 paths, sorted."""
    return _walk(Path(pk).resolve())[0]


def _key_root(pk: str | Path) -> Path:
    if not utf8_ok(Path(pk).absolute()):
        raise UnusableKeyError(f"provingKey path is not valid UTF-8: {shown(Path(pk).absolute())}")
    if not Path(pk).is_dir():
        raise FileNotFoundError(f"provingKey directory not found: {printable(pk)}")
    root = Path(pk).resolve()
    if not utf8_ok(root):
        raise UnusableKeyError(f"provingKey path is not valid UTF-8: {shown(root)}")
    return root


def discover(pk: str | Path) -> list[Placement]:
    """All placements of the key with their kernel keys assigned (see :func:`scan` for the AIRs
    refused and the stale `.so` files)."""
    return scan(pk).placements


def scan(pk: str | Path) -> Scan:
    """Walk the key: placements (kernel keys assigned), refused AIRs and broken `.so` files.
    Raises FileNotFoundError (no such directory) or UnusableKeyError (path not UTF-8)."""
    pk = _key_root(pk)
    airs, refused, broken = _walk(pk)
    places = []
    for air_dir, base in airs:
        si_path, ex_path = air_dir / (base + STARKINFO), air_dir / (base + EXPRS)
        rel = str((air_dir / base).relative_to(pk))
        phase = phase_of(air_dir)
        err, sym, content = "", _c_ident(f"{phase}_{base}"), ""
        if not SAFE_NAME.fullmatch(base):       # (match: `$` would accept a trailing newline)
            err = (f"{shown(si_path)}: file name {base!r} is not a safe name (a letter, digit or _, then "
                   "[A-Za-z0-9_.+-], at most 120 characters)")
        else:
            try:
                si = parse_starkinfo(load_json(si_path), si_path)
                sym = _c_ident(f"{phase}_a{si.airgroup_id}_{si.air_id}_b{si.n_bits}_e{si.cexp_id}")
                content = content_digest(si, _file_digest(ex_path))
            except ModelError as e:
                err = str(e)
            except OSError as e:                  # the expressionsinfo vanished / is unreadable
                err = f"{printable(ex_path)}: cannot read: {e.strerror or e}"
        places.append(Placement(rel, air_dir, base, phase, sym, si_path, ex_path, content, error=err))
    return Scan(assign_keys(places), refused, broken)


def bad_key(rel: str) -> str:
    """The kernel key of an AIR that cannot be built (BAD_KEY_PREFIX)."""
    return BAD_KEY_PREFIX + hashlib.sha256(rel.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def assign_keys(places: list[Placement]) -> list[Placement]:
    """Kernel key = sym; AIRs that share a sym but not the content get `sym_<digest8>` (warned);
    AIRs that cannot be built get `bad_key` (a namespace of their own). Valid AIRs share a key
    exactly when they share sym and content: a derived key that another (sym, content) already
    holds takes the content's whole digest instead."""
    by_sym: dict[str, set[str]] = {}
    for p in places:
        if not p.error:
            by_sym.setdefault(p.sym, set()).add(p.content)
    owner: dict[str, tuple[str, str]] = {}     # key -> the (sym, content) it was given to
    chosen: dict[tuple[str, str], str] = {}    # (sym, content) -> its key
    out = []
    for p in places:
        if p.error:
            out.append(replace(p, key=bad_key(p.rel)))
            continue
        ident = (p.sym, p.content)
        key = chosen.get(ident)
        if key is None:
            key = p.sym if len(by_sym[p.sym]) == 1 else f"{p.sym}_{p.content[:8]}"
            if owner.setdefault(key, ident) != ident:
                key = _c_ident(f"{p.sym}_{p.content}")
                owner[key] = ident
            chosen[ident] = key
            if key != p.sym:
                log.warning("sym %s is shared by AIRs with different expressions; %s gets kernel %s",
                            p.sym, printable(p.rel), key)
        out.append(replace(p, key=key))
    return out


def kernels(places: list[Placement]) -> dict[str, list[Placement]]:
    """kernel key -> its placements (in discovery order)."""
    out: dict[str, list[Placement]] = {}
    for p in places:
        out.setdefault(p.key, []).append(p)
    return out
