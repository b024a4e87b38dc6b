"""Decoder of the interpreter's ``.bin`` bytecode, section 1 only (spec §2.1, §2.2).

Used to cross-check our reading of the ``.bin`` writer's swap rule on real proving keys:
:func:`read_bin` decodes what the interpreter runs, :func:`expected_ops` maps a JSON expression
through :func:`codegen.check.reference.bin_order` (our swap-rule implementation) to the same encoding.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from codegen.check.reference import COPY, bin_order

Json = dict[str, Any]

MAGIC = b"chps"
SECTION_EXPRESSIONS = 1


class BinFormatError(ValueError):
    """The file is not a well-formed ``chps`` v1 bytecode file."""


class BinOp(NamedTuple):
    """One decoded op: ``ops`` byte and its 8 u16 ``args`` (spec §1.3)."""

    kind: int                 # 0 = 1x1, 1 = 3x1, 2 = 3x3
    args: tuple[int, ...]     # arith, destSlot, aType, aIdx, aOff, bType, bIdx, bOff

    @property
    def arith(self) -> int:
        return self.args[0]

    @property
    def a(self) -> tuple[int, int, int]:
        """(type, idx, off) of bin src0."""
        return self.args[2], self.args[3], self.args[4]

    @property
    def b(self) -> tuple[int, int, int]:
        """(type, idx, off) of bin src1."""
        return self.args[5], self.args[6], self.args[7]


@dataclass(frozen=True)
class BinExpression:
    """One expression of section 1 (spec §2.1)."""

    exp_id: int
    dest_dim: int
    dest_id: int
    stage: int
    n_temp1: int
    n_temp3: int
    line: str
    op_kinds: tuple[int, ...]
    args: tuple[int, ...]          # raw u16 args (8 per op for every prover expression)
    numbers: tuple[int, ...]       # the section's shared numbers[] (raw u64)

    @property
    def ops(self) -> list[BinOp]:
        """Ops paired with their 8 args; raises if ``nArgs != 8 * nOps`` (e.g. a Rust ``copy``)."""
        if len(self.args) != 8 * len(self.op_kinds):
            raise BinFormatError(f"expId {self.exp_id}: {len(self.args)} args for "
                                 f"{len(self.op_kinds)} ops (not 8 per op)")
        return [BinOp(k, self.args[8 * i: 8 * i + 8]) for i, k in enumerate(self.op_kinds)]


@dataclass(frozen=True)
class BinFile:
    """Section 1 of a ``.bin``."""

    max_tmp1: int
    max_tmp3: int
    max_args: int
    max_ops: int
    numbers: tuple[int, ...]
    expressions: dict[int, BinExpression]   # by expId


class _Cursor:
    def __init__(self, buf: bytes, pos: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, pos, end

    def take(self, fmt: str) -> tuple[Any, ...]:
        size = struct.calcsize(fmt)
        if self.pos + size > self.end:
            raise BinFormatError(f"truncated at byte {self.pos} (need {size})")
        out = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return out

    def cstring(self) -> str:
        nul = self.buf.find(b"\0", self.pos, self.end)
        if nul < 0:
            raise BinFormatError(f"unterminated string at byte {self.pos}")
        s = self.buf[self.pos:nul].decode("utf-8", errors="replace")
        self.pos = nul + 1
        return s


def _sections(buf: bytes) -> dict[int, tuple[int, int]]:
    """Header ``magic[4] u32 version u32 nSections``, then ``u32 id, u64 size, payload``."""
    if buf[:4] != MAGIC:
        raise BinFormatError(f"bad magic {buf[:4]!r}")
    cur = _Cursor(buf, 4, len(buf))
    version, n_sections = cur.take("<II")
    if version != 1:
        raise BinFormatError(f"unsupported version {version}")
    out: dict[int, tuple[int, int]] = {}
    for _ in range(n_sections):
        sid, size = cur.take("<IQ")
        if cur.pos + size > len(buf):
            raise BinFormatError(f"section {sid} overruns the file")
        out[sid] = (cur.pos, cur.pos + size)
        cur.pos += size
    return out


def parse_bin(buf: bytes) -> BinFile:
    """Decode section 1 (expressions) of ``.bin`` bytes (spec §2.1; EB:365-420)."""
    sections = _sections(buf)
    if SECTION_EXPRESSIONS not in sections:
        raise BinFormatError("no expressions section (id 1)")
    cur = _Cursor(buf, *sections[SECTION_EXPRESSIONS])
    (max_tmp1, max_tmp3, max_args, max_ops,
     n_ops, n_args, n_numbers, n_expr) = cur.take("<8I")
    heads = []
    for _ in range(n_expr):
        head = cur.take("<10I")
        heads.append((head, cur.cstring()))
    op_kinds = cur.take(f"<{n_ops}B")
    args = cur.take(f"<{n_args}H")
    numbers = cur.take(f"<{n_numbers}Q")
    exprs: dict[int, BinExpression] = {}
    for (exp_id, dest_dim, dest_id, stage, nt1, nt3, nops, ops_off, nargs, args_off), line in heads:
        if ops_off + nops > n_ops or args_off + nargs > n_args:
            raise BinFormatError(f"expId {exp_id}: ops/args range out of bounds")
        exprs[exp_id] = BinExpression(
            exp_id, dest_dim, dest_id, stage, nt1, nt3, line,
            op_kinds[ops_off:ops_off + nops], args[args_off:args_off + nargs], numbers)
    return BinFile(max_tmp1, max_tmp3, max_args, max_ops, numbers, exprs)


def read_bin(path: str | Path) -> BinFile:
    """:func:`parse_bin` of a file."""
    return parse_bin(Path(path).read_bytes())


# ---------------------------------------------------------------------------------------------
# JSON -> expected bin encoding (spec §2.2)
# ---------------------------------------------------------------------------------------------


class ExpectedOperand(NamedTuple):
    """Bin operand predicted from JSON. ``idx``/``off`` None = not predictable (tmp slots)."""

    type: int
    idx: int | None
    off: int | None
    number: int | None = None      # for numbers: the value numbers[idx] must hold


class ExpectedOp(NamedTuple):
    kind: int
    arith: int
    a: ExpectedOperand
    b: ExpectedOperand | None


def buffer_commit_size(starkinfo: Json) -> int:
    """``B = 1 + nStages + 3 + nCustomCommits`` (spec §2.2; ECTX:202)."""
    return 1 + starkinfo["nStages"] + 3 + len(starkinfo.get("customCommits", []))


def _prefix(values_map: list[Json], i: int) -> int:
    return sum(1 if e["stage"] == 1 else 3 for e in values_map[:i])


def operand_code(starkinfo: Json, o: Json) -> ExpectedOperand:
    """Type code and, where fixed by the JSON, idx/off of an operand (spec §2.2 table).

    ``off`` of cm/const/custom is the index of ``o['prime']`` in ``openingPoints`` (the JSON
    ``prime`` is the opening value).
    """
    n_stages = starkinfo["nStages"]
    base = buffer_commit_size(starkinfo)
    t = o["type"]
    opening = starkinfo["openingPoints"]
    if t == "const":
        return ExpectedOperand(0, o["id"], opening.index(o["prime"]))
    if t == "cm":
        pol = starkinfo["cmPolsMap"][o["id"]]
        return ExpectedOperand(pol["stage"], pol["stagePos"], opening.index(o["prime"]))
    if t == "Zi":
        return ExpectedOperand(n_stages + 2, 1 + o.get("boundaryId", 0), 0)
    if t == "xDivXSubXi":
        return ExpectedOperand(n_stages + 3, o["id"], 0)
    if t == "custom":
        return ExpectedOperand(n_stages + 4 + o["commitId"], o["id"], opening.index(o["prime"]))
    if t == "tmp":
        return ExpectedOperand(base if o["dim"] == 1 else base + 1, None, 0)
    if t == "public":
        return ExpectedOperand(base + 2, o["id"], 0)
    if t == "number":
        return ExpectedOperand(base + 3, None, 0, int(o["value"]))
    if t == "airvalue":
        return ExpectedOperand(base + 4, _prefix(starkinfo["airValuesMap"], o["id"]), 0)
    if t == "proofvalue":
        return ExpectedOperand(base + 5, _prefix(starkinfo["proofValuesMap"], o["id"]), 0)
    if t == "airgroupvalue":
        return ExpectedOperand(base + 6, _prefix(starkinfo["airgroupValuesMap"], o["id"]), 0)
    if t == "challenge":
        return ExpectedOperand(base + 7, 3 * o["id"], 0)
    if t == "eval":
        return ExpectedOperand(base + 8, 3 * o["id"], 0)
    raise ValueError(f"no bin type code for operand type {t!r}")


def expected_ops(starkinfo: Json, expr: Json) -> list[ExpectedOp]:
    """The bin encoding our swap rule predicts for a JSON expression (spec §1.3, §2.2).

    ``copy`` is predicted as ops 0 / arith 0 with only src0 (the Rust writer, spec §7.3).
    """
    out = []
    for step in expr["code"]:
        bs = bin_order(step)
        a = operand_code(starkinfo, bs.a)
        if bs.arith == COPY:
            out.append(ExpectedOp(0, 0, a, None))
        else:
            assert bs.b is not None
            out.append(ExpectedOp(bs.ops_kind, bs.arith, a, operand_code(starkinfo, bs.b)))
    return out


def compare_expression(starkinfo: Json, expr: Json, binexpr: BinExpression) -> list[str]:
    """Mismatches between the JSON (through our swap rule) and the decoded bin; [] = agree.

    Checks per op: ops kind, arith, both type codes, and every predictable idx/off (numbers:
    ``numbers[idx]`` equals the JSON literal; cm/const: ``openingPoints[off] == prime``).
    """
    want = expected_ops(starkinfo, expr)
    got = binexpr.ops
    errs: list[str] = []
    if len(want) != len(got):
        return [f"expId {expr['expId']}: {len(want)} JSON ops vs {len(got)} bin ops"]
    for k, (w, g) in enumerate(zip(want, got)):
        where = f"expId {expr['expId']} op {k}"
        if (w.kind, w.arith) != (g.kind, g.arith):
            errs.append(f"{where}: kind/arith {(w.kind, w.arith)} vs bin {(g.kind, g.arith)}")
        pairs = [("A", w.a, g.a)] + ([("B", w.b, g.b)] if w.b is not None else [])
        for name, wo, (gt, gi, go) in pairs:
            if wo.type != gt:
                errs.append(f"{where} {name}: type {wo.type} vs bin {gt}")
                continue
            if wo.idx is not None and wo.idx != gi:
                errs.append(f"{where} {name}: idx {wo.idx} vs bin {gi}")
            if wo.off is not None and wo.off != go:
                errs.append(f"{where} {name}: off {wo.off} vs bin {go}")
            nums = binexpr.numbers
            if wo.number is not None and (gi >= len(nums) or nums[gi] != wo.number):
                errs.append(f"{where} {name}: number {wo.number} vs bin numbers[{gi}]")
    return errs
