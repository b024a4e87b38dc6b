"""Strict, typed views of `<base>.starkinfo.json` and `<base>.expressionsinfo.json`.

Every value the generator reads is validated here (type, range, cross-references). Any problem raises
`ModelError` naming the file and the JSON path (e.g. ``expressionsCode[12].code[40].src[1].id``),
so nothing from the JSON text reaches emitted C unchecked: later stages only ever format the
validated integers held by these dataclasses.
"""
from __future__ import annotations

import errno
import json
import os
import re
import reprlib
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

U64 = 1 << 64
OPS = ("add", "sub", "mul", "copy")
#: operand types we model; a few of them are refused later by ir.py (with a reason).
OPERAND_TYPES = (
    "cm", "const", "tmp", "number", "public", "challenge", "airvalue", "airgroupvalue",
    "proofvalue", "eval", "Zi", "custom", "xDivXSubXi", "x", "q",
)
MAX_ID = 1 << 31
#: the most columns a section (mapSectionsN), constants (nConstants) or public inputs (nPublics) of
#: one AIR may have: the real keys have at most a few hundred, and a checker allocates rows x
#: columns words for each, so a size field of 2^31 is bad input, never a 16 GB allocation
MAX_COLUMNS = 1 << 16


def printable(s: str | Path) -> str:
    """`s` for a one-line message: as is when printable, else escaped (newlines, NUL, bidi controls,
    undecodable file-name bytes) so a hostile file name cannot forge log lines or break a print."""
    s = str(s)
    return s if s.isprintable() else repr(s)[1:-1]


class ModelError(Exception):
    """Bad input: names the file and the JSON path of the offending value."""

    def __init__(self, file: str | Path, path: str, msg: str):
        self.file, self.path, self.msg = str(file), path, msg
        super().__init__(f"{printable(file)}: {path or '<root>'}: {msg}")


class _Node:
    """A JSON value with its file and path, with typed accessors that raise ModelError."""

    __slots__ = ("v", "file", "path")

    def __init__(self, v: Any, file: str, path: str = ""):
        self.v, self.file, self.path = v, file, path

    def err(self, msg: str) -> ModelError:
        return ModelError(self.file, self.path, msg)

    def _sub(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        if not _PLAIN_KEY.fullmatch(key):      # a key taken from the data (mapSectionsN): quoted
            return f"{self.path}[{key[:32]!r}{'...' if len(key) > 32 else ''}]"
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return isinstance(self.v, dict) and key in self.v

    def __getitem__(self, key: str) -> "_Node":
        if not isinstance(self.v, dict):
            raise self.err(f"expected an object, got {type(self.v).__name__}")
        if key not in self.v:
            raise ModelError(self.file, self._sub(key), "missing field")
        return _Node(self.v[key], self.file, self._sub(key))

    def get(self, key: str, default: Any = None) -> "_Node":
        if self.has(key):
            return self[key]
        return _Node(default, self.file, self._sub(key))

    def items(self) -> list["_Node"]:
        if not isinstance(self.v, list):
            raise self.err(f"expected a list, got {type(self.v).__name__}")
        return [_Node(x, self.file, self._sub(i)) for i, x in enumerate(self.v)]

    def int(self, lo: int = 0, hi: int = MAX_ID) -> int:
        v = self.v
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.err(f"expected an integer, got {show(v)}")
        if not lo <= v <= hi:
            raise self.err(f"integer {show(v)} out of range [{lo}, {hi}]")
        return v

    def str(self) -> str:
        if not isinstance(self.v, str):
            raise self.err(f"expected a string, got {show(self.v)}")
        return self.v

    def u64(self) -> int:
        """A number literal: decimal string (as the setup writes them) or integer, in [0, 2^64)."""
        v = self.v
        if isinstance(v, str):
            s = v.strip()
            if not s or not s.isascii() or not s.isdigit() or len(s) > 20:
                raise self.err(f"number literal is not a decimal u64: {show(v)}")
            v = int(s)
        elif isinstance(v, bool) or not isinstance(v, int):
            raise self.err(f"expected a number literal, got {show(v)}")
        if not 0 <= v < U64:
            raise self.err(f"number literal {show(v)} is outside [0, 2^64)")
        return v

    def dim(self) -> int:
        d = self.int(1, 3)
        if d not in (1, 3):
            raise self.err(f"dim must be 1 or 3, got {d}")
        return d


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 2, 60, 60, 60


def show(v: Any, width: int = 60) -> str:
    """A short one-line rendering of a JSON value for messages: bounded in size and depth, never
    raising (huge ints, deep nesting), control characters escaped."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 256:
        return f"<{v.bit_length()}-bit integer>"
    try:
        s = _REPR.repr(v)
    except (ValueError, RecursionError):        # e.g. an int > 4300 digits inside a list
        s = f"<{type(v).__name__}>"
    return s if len(s) <= width else s[: width - 3] + "..."


# ----------------------------------------------------------------------------------- starkinfo
@dataclass(frozen=True)
class CmPol:
    stage: int
    dim: int
    stage_pos: int


@dataclass(frozen=True)
class StarkInfo:
    file: str
    name: str
    airgroup_id: int
    air_id: int
    n_bits: int
    n_bits_ext: int
    n_stages: int
    opening_points: tuple[int, ...]
    cm_pols: tuple[CmPol, ...]
    n_constants: int
    n_challenges: int
    n_publics: int
    n_evals: int
    airvalue_stages: tuple[int, ...]
    airgroupvalue_stages: tuple[int, ...]
    proofvalue_stages: tuple[int, ...]
    boundaries: tuple[str, ...]
    cexp_id: int
    q_dim: int
    n_custom_commits: int
    section_cols: dict[str, int] = field(default_factory=dict)

    @property
    def blowup(self) -> int:
        return 1 << (self.n_bits_ext - self.n_bits)


def _stages(node: _Node) -> tuple[int, ...]:
    return tuple(n["stage"].int(0, 64) for n in node.items())


def _airgroup_stages(root: _Node) -> tuple[int, ...]:
    """airgroupValuesMap stages; real keys reference ids beyond it that `airGroupValues` lists
    (diff_buses): those are appended, so the prefix-sum position stays the writer's."""
    st = _stages(root.get("airgroupValuesMap", []))
    extra = root.get("airGroupValues", []).items()
    return st + tuple(n["stage"].int(0, 64) for n in extra[len(st):])


def parse_starkinfo(data: Any, file: str | Path) -> StarkInfo:
    root = _Node(data, str(file))
    ss = root["starkStruct"]
    n_bits = ss["nBits"].int(0, 40)
    n_bits_ext = ss["nBitsExt"].int(n_bits, 40)
    n_stages = root["nStages"].int(1, 16)
    cm_pols = []
    for n in root["cmPolsMap"].items():
        cm_pols.append(CmPol(n["stage"].int(1, n_stages + 1), n["dim"].dim(), n["stagePos"].int(0, MAX_COLUMNS)))
    sections = {}
    msn = root["mapSectionsN"]
    if not isinstance(msn.v, dict):
        raise msn.err("expected an object")
    for k in msn.v:
        sections[k] = msn[k].int(0, MAX_COLUMNS)
    for i, (p, n) in enumerate(zip(cm_pols, root["cmPolsMap"].items())):
        cols = sections.get(f"cm{p.stage}")
        if cols is not None and p.stage_pos + p.dim > cols:
            raise n["stagePos"].err(f"stagePos {p.stage_pos} + dim {p.dim} exceeds mapSectionsN.cm{p.stage} = {cols}")
    ops = tuple(n.int(-(1 << 20), 1 << 20) for n in root["openingPoints"].items())
    bnds = tuple(n["name"].str() for n in root["boundaries"].items())
    q_dim = root["qDim"].int(1, 3)
    if q_dim not in (1, 3):
        raise root["qDim"].err(f"qDim must be 1 or 3, got {q_dim}")
    return StarkInfo(
        file=str(file),
        name=root.get("name", "").v if isinstance(root.get("name", "").v, str) else "",
        airgroup_id=root["airgroupId"].int(),
        air_id=root["airId"].int(),
        n_bits=n_bits,
        n_bits_ext=n_bits_ext,
        n_stages=n_stages,
        opening_points=ops,
        cm_pols=tuple(cm_pols),
        n_constants=root["nConstants"].int(0, MAX_COLUMNS),
        n_challenges=len(root["challengesMap"].items()),
        n_publics=root["nPublics"].int(0, MAX_COLUMNS) if root.has("nPublics") else len(root["publicsMap"].items()),
        n_evals=len(root["evMap"].items()),
        airvalue_stages=_stages(root.get("airValuesMap", [])),
        airgroupvalue_stages=_airgroup_stages(root),
        proofvalue_stages=_stages(root.get("proofValuesMap", [])),
        boundaries=bnds,
        cexp_id=root["cExpId"].int(),
        q_dim=q_dim,
        n_custom_commits=len(root.get("customCommits", []).items()),
        section_cols=sections,
    )


# ----------------------------------------------------------------------------- expressionsinfo
@dataclass(frozen=True)
class Operand:
    type: str
    dim: int
    id: int = 0
    prime: int = 0        # opening VALUE (cm/const/custom)
    value: int = 0        # number literal (raw u64)
    boundary_id: int = 0  # Zi


@dataclass(frozen=True)
class Step:
    op: str
    dest: Operand
    src: tuple[Operand, ...]


@dataclass(frozen=True)
class Expression:
    index: int            # position in expressionsCode (for error paths)
    exp_id: int
    stage: int
    code: tuple[Step, ...]


@dataclass(frozen=True)
class HintPair:
    """A hint with a numerator and a denominator (im_col, gprod_col, ...): the §4.3 pair launch."""

    name: str
    numerator: tuple[str, int, int]    # (op, id, dim); id = expId for op 'tmp'
    denominator: tuple[str, int, int]


@dataclass(frozen=True)
class ExpressionsInfo:
    file: str
    expressions: tuple[Expression, ...]
    hints: tuple[HintPair, ...]

    def by_id(self) -> dict[int, Expression]:
        return {e.exp_id: e for e in self.expressions}


def _operand(n: _Node, si: StarkInfo) -> Operand:
    t = n["type"].str()
    if t not in OPERAND_TYPES:
        raise n["type"].err(f"unknown operand type {show(t)}")
    # `dim` is required of every source operand, even where the type fixes it: the setup writes it
    # for each one, and the .bin writer's swap rule compares the dims it had, so a JSON without one
    # does not say which operand order the prover runs (a missing field, not a default)
    if t in ("number", "Zi", "x") and n["dim"].dim() != 1:
        raise n["dim"].err(f"{t} operands have dim 1")
    if t == "number":
        return Operand("number", 1, value=n["value"].u64())
    if t == "Zi":
        return Operand("Zi", 1, boundary_id=n["boundaryId"].int(0, max(len(si.boundaries) - 1, 0)))
    if t == "x":
        return Operand("x", 1)
    dim = n["dim"].dim()
    if t == "q":
        return Operand("q", dim, id=n.get("id", 0).int())
    if t == "tmp":
        return Operand("tmp", dim, id=n["id"].int())
    limits = {
        "cm": len(si.cm_pols), "const": si.n_constants, "challenge": si.n_challenges,
        "public": si.n_publics, "eval": si.n_evals, "airvalue": len(si.airvalue_stages),
        "airgroupvalue": len(si.airgroupvalue_stages), "proofvalue": len(si.proofvalue_stages),
        "custom": MAX_ID, "xDivXSubXi": max(len(si.opening_points), 1),
    }
    idn = n["id"]
    oid = idn.int(0, max(limits[t] - 1, 0))
    if limits[t] == 0:
        raise idn.err(f"{t} id {oid} but the starkinfo declares no {t} entries")
    prime = 0
    if t in ("cm", "const", "custom"):
        prime = n["prime"].int(-(1 << 20), 1 << 20)
        if prime not in si.opening_points:
            raise n["prime"].err(f"opening {prime} is not in openingPoints {show(list(si.opening_points), 120)}")
    if t == "cm" and si.cm_pols[oid].dim != dim:
        raise n["dim"].err(f"cm {oid} has dim {si.cm_pols[oid].dim} in cmPolsMap, operand says {dim}")
    if t == "const" and dim != 1:
        raise n["dim"].err("const operands have dim 1")
    if t in ("challenge", "eval") and dim != 3:
        raise n["dim"].err(f"{t} operands have dim 3")
    if t == "public" and dim != 1:
        raise n["dim"].err("public operands have dim 1")
    if t in ("airvalue", "airgroupvalue", "proofvalue"):
        stages = {"airvalue": si.airvalue_stages, "airgroupvalue": si.airgroupvalue_stages,
                  "proofvalue": si.proofvalue_stages}[t]
        want = 1 if stages[oid] == 1 else 3
        if dim != want:
            raise n["dim"].err(f"{t} {oid} (stage {stages[oid]}) has dim {want}, operand says {dim}")
    return Operand(t, dim, id=oid, prime=prime)


def _hint_value(n: _Node) -> tuple[str, int, int]:
    op = n["op"].str()
    if op == "tmp":
        return ("tmp", n["id"].int(), n.get("dim", 1).dim())
    if op == "number":
        return ("number", 0, 1)
    return (op[:16], 0, n.get("dim", 1).dim() if n.has("dim") else 1)


def _check_hint_refs(root: _Node, exp_ids: set[int]) -> None:
    """Every `{"op": "tmp", "id": N}` under hintsInfo names an expression of expressionsCode
    (a dangling reference is an error naming its JSON path)."""
    stack = [root.get("hintsInfo", [])]
    while stack:
        n = stack.pop()
        if isinstance(n.v, dict):
            if n.v.get("op") == "tmp":
                eid = n["id"].int()
                if eid not in exp_ids:
                    raise n["id"].err(f"hint references expression {eid}, which is not in expressionsCode")
            stack.extend(reversed([n[k] for k in n.v]))
        elif isinstance(n.v, list):
            stack.extend(reversed(n.items()))


HINT_PAIR_FIELDS = ("numerator", "denominator", "numerator_air", "denominator_air", "numerator_direct",
                    "denominator_direct")


def _hints(root: _Node) -> tuple[HintPair, ...]:
    out = []
    for h in root.get("hintsInfo", []).items():
        name = h["name"].str()
        fields = {}
        for f in h.get("fields", []).items():
            fname = f["name"].str()
            vals = f["values"].items()
            if fname in HINT_PAIR_FIELDS and len(vals) == 1:
                fields[fname] = _hint_value(vals[0])
        for num, den in (("numerator", "denominator"), ("numerator_air", "denominator_air"),
                         ("numerator_direct", "denominator_direct")):    # the prover's pair launches
            if num in fields and den in fields:
                out.append(HintPair(name[:64], fields[num], fields[den]))
    return tuple(out)


def parse_expressionsinfo(data: Any, file: str | Path, si: StarkInfo) -> ExpressionsInfo:
    root = _Node(data, str(file))
    exprs = []
    seen: set[int] = set()
    for i, e in enumerate(root["expressionsCode"].items()):
        exp_id = e["expId"].int()
        if exp_id in seen:
            raise e["expId"].err(f"duplicate expId {exp_id}")
        seen.add(exp_id)
        steps = []
        for s in e["code"].items():
            op = s["op"].str()
            if op not in OPS:
                raise s["op"].err(f"unknown op {show(op)} (expected one of {', '.join(OPS)})")
            srcs = s["src"].items()
            want = 1 if op == "copy" else 2
            if len(srcs) != want:
                raise s["src"].err(f"op {op} takes {want} source(s), got {len(srcs)}")
            src = tuple(_operand(x, si) for x in srcs)
            dest = _operand(s["dest"], si)
            steps.append(Step(op, dest, src))
        exprs.append(Expression(i, exp_id, e.get("stage", 0).int(0, 64), tuple(steps)))
    _check_hint_refs(root, seen)
    return ExpressionsInfo(str(file), tuple(exprs), _hints(root))


def open_regular(path: str | Path):
    """Open `path` for binary reading only if it is a regular file: the open does not block (a
    FIFO opened without O_NONBLOCK waits for a writer forever) and a FIFO, directory, socket or
    device is refused with OSError (EINVAL / EISDIR) before any read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
            what = "a directory" if stat.S_ISDIR(mode) else \
                "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
            raise OSError(code, f"is {what}", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class _Dup(dict):
    """An object in which a key occurred twice (found by the hook; located after the parse)."""

    dup: str = ""


def _pairs(found: list):
    def hook(pairs: list) -> dict:
        d = dict(pairs)
        if len(d) != len(pairs):
            seen: set = set()
            dd = _Dup(d)
            dd.dup = next(k for k, _ in pairs if k in seen or seen.add(k))
            found.append(dd)
            return dd
        return d
    return hook


def _dup_path(root: Any, file: str) -> ModelError:
    """The JSON path of the first duplicated key in document order (iterative: no recursion)."""
    stack: list[tuple[Any, _Node]] = [(root, _Node(root, file))]
    while stack:
        v, node = stack.pop()
        if isinstance(v, _Dup):
            return ModelError(file, node._sub(v.dup), f"duplicate key {show(v.dup)}")
        if isinstance(v, dict):
            stack.extend((x, _Node(x, file, node._sub(k))) for k, x in reversed(list(v.items())))
        elif isinstance(v, list):
            stack.extend((x, _Node(x, file, node._sub(i))) for i, x in reversed(list(enumerate(v))))
    return ModelError(file, "", "duplicate key")        # not reached


def read_input(path: str | Path) -> bytes:
    """The bytes of a JSON input, read once: a regular file only (never a FIFO); ModelError naming
    the file when it cannot be read. What a stage parses and what it records as the input's
    identity are these same bytes."""
    p = Path(path)
    try:
        with open_regular(p) as f:
            return f.read()
    except OSError as e:
        raise ModelError(p, "", f"cannot read: {e.strerror or e}") from None


def parse_json(text: bytes, path: str | Path) -> Any:
    """Parse a JSON input's bytes strictly: valid UTF-8 JSON, no key twice in one object (a
    duplicate is an error naming the JSON path: `starkStruct.nBits`)."""
    p = Path(path)
    found: list = []
    try:
        data = json.loads(text, object_pairs_hook=_pairs(found))
    except (ValueError, UnicodeDecodeError) as e:   # JSONDecodeError; an int of > 4300 digits
        raise ModelError(p, "", f"invalid JSON: {e}") from None
    except RecursionError:                          # nesting deeper than the parser's stack
        raise ModelError(p, "", "invalid JSON: nested too deeply") from None
    if found:
        raise _dup_path(data, str(p))
    return data


def load_json(path: str | Path) -> Any:
    """`parse_json` of the file's bytes (`read_input`)."""
    return parse_json(read_input(path), path)


def load_air(starkinfo_path: str | Path, expressions_path: str | Path) -> tuple[StarkInfo, ExpressionsInfo]:
    si = parse_starkinfo(load_json(starkinfo_path), starkinfo_path)
    return si, parse_expressionsinfo(load_json(expressions_path), expressions_path, si)

