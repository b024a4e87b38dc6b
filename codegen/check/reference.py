"""Independent numpy oracle: evaluates raw ``expressionsinfo`` JSON as the GPU interpreter does.

Works on the plain ``json.load`` dicts and nothing else of ours (no ``model``/``ir``), so it can
cross-check them. Bit-exactness comes from three things (spec §8):

* the ``.bin`` writer's operand reordering (spec §1.3): :func:`operand_rank`, :func:`bin_order`;
* the per-shape op table (spec §1.4) on raw partially-reduced words (:mod:`codegen.check.gl64`);
* the operand read rules (spec §2.4, ARCHITECTURE.md "Domains and buffers").

All rows are evaluated at once (numpy vectors of length ``D``); values that are the same on every
row (publics, numbers, challenges, ...) are length-1 arrays that broadcast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from codegen.check import gl64
from codegen.check.gl64 import U64

Json = dict[str, Any]
Value = tuple[U64, ...]
"""A value: 1 or 3 components, each of shape ``(D,)`` or ``(1,)`` (broadcast)."""

# Bin op encoding (spec §1.3). COPY is not a bin arith code: it marks JSON ``copy`` (dest = src0).
OPS_11, OPS_31, OPS_33 = 0, 1, 2
ARITH_ADD, ARITH_SUB, ARITH_MUL, ARITH_SUB_SWAP = 0, 1, 2, 3
COPY = -1
_ARITH_OF_OP = {"add": ARITH_ADD, "sub": ARITH_SUB, "mul": ARITH_MUL}

# Store modes (spec §4.3; EC:23-27).
WRITE, MUL_INV, WRITE_INV = 0, 1, 2

U64_LIMIT = 1 << 64


class OracleRefusal(ValueError):
    """An input the oracle documents it does not evaluate (the only exception the fuzz harness and
    the host check may treat as "not comparable"; anything else the oracle raises is a defect or a
    harness bug). Raised for: an operand kind outside :data:`_RANK_BY_DIM` / the reader
    (:class:`UnsupportedOperand`), a Zi ``boundaryId != 0``, a step op other than add/sub/mul/copy,
    a tmp read before it is written, an operand whose JSON dim disagrees with the starkinfo, a
    ``number`` that is not a u64 literal, a read past the end of a scalar buffer, and a denominator
    paired in ``hintsInfo`` with numerators of both dims (:func:`mul_inv_numerator_dim`)."""


class UnsupportedOperand(OracleRefusal):
    """An operand kind the oracle (like the generator) does not evaluate."""


@dataclass
class DomainData:
    """Raw u64 inputs of one evaluation over ``n_rows`` rows (ARCHITECTURE.md, reference.py API)."""

    n_rows: int                         # D
    cm: dict[int, np.ndarray]           # stage -> uint64 (n_elem_cols_of_stage, D)
    const: np.ndarray                   # uint64 (nConstants, D)
    zi: np.ndarray | None               # uint64 (D,) everyRow zerofier (Q only)
    publics: np.ndarray
    challenges: np.ndarray
    airvalues: np.ndarray
    airgroupvalues: np.ndarray
    proofvalues: np.ndarray
    evals: np.ndarray


# ---------------------------------------------------------------------------------------------
# Swap rule (spec §1.3)
# ---------------------------------------------------------------------------------------------

_RANK_BY_DIM: dict[str, tuple[int, int]] = {  # type -> (rank if dim 1, rank if dim 3)
    "cm": (0, 6), "custom": (0, 6), "const": (0, 0), "Zi": (0, 0), "tmp": (1, 7),
    "public": (2, 2), "number": (3, 3), "airvalue": (4, 8), "proofvalue": (5, 10),
    "xDivXSubXi": (6, 6), "airgroupvalue": (9, 9), "challenge": (11, 11), "eval": (12, 12),
}


def operand_rank(operand: Json) -> int:
    """Rank of a JSON operand in the ``.bin`` writer's ordering (spec §1.3, PA:21-38, 208-223)."""
    try:
        lo, hi = _RANK_BY_DIM[operand["type"]]
    except KeyError:
        raise UnsupportedOperand(f"no rank for operand type {operand.get('type')!r}") from None
    return lo if operand["dim"] == 1 else hi


class BinStep(NamedTuple):
    """One JSON step in interpreter order: ``A`` = bin src0, ``B`` = bin src1 (None for copy)."""

    ops_kind: int   # OPS_11 / OPS_31 / OPS_33
    arith: int      # ARITH_* or COPY
    a: Json
    b: Json | None
    swapped: bool


def bin_order(step: Json) -> BinStep:
    """Apply the writer's swap: ``dimA != dimB ? dimB > dimA : rank(A) > rank(B)`` (spec §1.3).

    A swapped ``sub`` becomes ``sub_swap``; after the swap the shape is 1x1, 3x1 or 3x3.
    """
    op, src = step["op"], step["src"]
    if op == "copy":
        a = src[0]
        return BinStep(OPS_11 if a["dim"] == 1 else OPS_33, COPY, a, None, False)
    if op not in _ARITH_OF_OP or len(src) != 2:
        raise OracleRefusal(f"unsupported step op={op!r} with {len(src)} sources")
    a, b = src
    da, db = a["dim"], b["dim"]
    swap = db > da if da != db else operand_rank(a) > operand_rank(b)
    arith = _ARITH_OF_OP[op]
    if swap:
        a, b = b, a
        da, db = db, da
        if arith == ARITH_SUB:
            arith = ARITH_SUB_SWAP
    kind = {(1, 1): OPS_11, (3, 1): OPS_31, (3, 3): OPS_33}.get((da, db))
    if kind is None:
        raise OracleRefusal(f"operand dims ({da}, {db}) after swap")
    return BinStep(kind, arith, a, b, swap)


# ---------------------------------------------------------------------------------------------
# Op semantics (spec §1.4)
# ---------------------------------------------------------------------------------------------


def apply_op(ops_kind: int, arith: int, a: Value, b: Value) -> Value:
    """Result of one bin op on loaded operands (spec §1.4 table); ``a``/``b`` in bin order."""
    if ops_kind == OPS_11:
        (x,), (y,) = a, b
        fn = {ARITH_ADD: gl64.add, ARITH_SUB: gl64.sub, ARITH_MUL: gl64.mul}.get(arith)
        return (fn(x, y),) if fn is not None else (gl64.sub(y, x),)
    if ops_kind == OPS_31:
        (y,) = b
        if arith == ARITH_ADD:
            return (gl64.add(a[0], y), a[1], a[2])
        if arith == ARITH_SUB:
            return (gl64.sub(a[0], y), a[1], a[2])
        if arith == ARITH_MUL:
            return gl64.mul31(a, y)
        return (gl64.sub(y, a[0]), gl64.neg(a[1]), gl64.neg(a[2]))
    if arith == ARITH_ADD:
        return gl64.add3(a, b)
    if arith == ARITH_SUB:
        return gl64.sub3(a, b)
    if arith == ARITH_MUL:
        return gl64.mul33(a, b)
    return gl64.sub3(b, a)


# ---------------------------------------------------------------------------------------------
# Operand reads (spec §2.4; ARCHITECTURE.md "Domains and buffers")
# ---------------------------------------------------------------------------------------------


def _stage_position(values_map: list[Json], i: int) -> int:
    """Buffer position of entry ``i``: entries before it take 1 slot (stage 1) or 3 (spec §2.2).

    Sums over the entries that exist: real keys reference ids past the end of the map (diff_buses
    Air2/Air3 read airgroupvalue 1 with a 1-entry airgroupValuesMap; the bin uses position 3).
    """
    return sum(1 if e["stage"] == 1 else 3 for e in values_map[:i])


def _const_vec(values: np.ndarray, start: int, dim: int, what: str) -> Value:
    if start + dim > len(values):
        raise OracleRefusal(f"{what}: reads [{start}, {start + dim}) of {len(values)} values")
    return tuple(np.asarray(values[start + d: start + d + 1], dtype=np.uint64) for d in range(dim))


class _Reader:
    """Loads JSON operands for one evaluation; caches shifted columns."""

    def __init__(self, starkinfo: Json, data: DomainData, extended: bool) -> None:
        stark = starkinfo["starkStruct"]
        self.si = starkinfo
        self.data = data
        self.n = data.n_rows
        self.row_factor = 1 << (stark["nBitsExt"] - stark["nBits"]) if extended else 1
        self.tmps: dict[int, Value] = {}
        self._cols: dict[tuple[str, int, int, int], U64] = {}

    def _column(self, kind: str, stage: int, col: int, prime: int) -> U64:
        """``section[col][(r + prime*factor) mod D]`` for all rows ``r``."""
        shift = prime * self.row_factor
        key = (kind, stage, col, shift)
        if key not in self._cols:
            section = self.data.const if kind == "const" else self.data.cm[stage]
            column = np.asarray(section[col], dtype=np.uint64)
            if column.shape != (self.n,):
                raise ValueError(f"{kind}{stage or ''} column {col}: shape {column.shape}, "
                                 f"expected ({self.n},)")
            self._cols[key] = np.roll(column, -shift)
        return self._cols[key]

    def load(self, o: Json) -> Value:
        t, dim = o["type"], o["dim"]
        if t == "tmp":
            if o["id"] not in self.tmps:
                raise OracleRefusal(f"tmp {o['id']} read before it is written")
            value = self.tmps[o["id"]]
        elif t == "cm":
            pol = self.si["cmPolsMap"][o["id"]]
            if pol["dim"] != dim:
                raise OracleRefusal(f"cm {o['id']}: JSON dim {dim} != cmPolsMap dim {pol['dim']}")
            value = tuple(self._column("cm", pol["stage"], pol["stagePos"] + d, o["prime"])
                          for d in range(dim))
        elif t == "const":
            value = (self._column("const", 0, o["id"], o["prime"]),)
        elif t == "Zi":
            if o.get("boundaryId", 0) != 0:
                raise UnsupportedOperand(f"Zi boundaryId {o['boundaryId']} (only everyRow)")
            if self.data.zi is None:
                raise ValueError("expression reads Zi but DomainData.zi is None")
            zi = np.asarray(self.data.zi, dtype=np.uint64)
            if zi.shape != (self.n,):
                raise ValueError(f"zi: shape {zi.shape}, expected ({self.n},)")
            value = (zi,)  # zi[r]: no stride
        elif t == "number":
            v = int(o["value"])
            if not 0 <= v < U64_LIMIT:
                raise OracleRefusal(f"number {o['value']} is not a u64 literal")
            value = (np.array([v], dtype=np.uint64),)
        elif t == "public":
            value = _const_vec(self.data.publics, o["id"], 1, "public")
        elif t == "challenge":
            value = _const_vec(self.data.challenges, 3 * o["id"], 3, "challenge")
        elif t == "eval":
            value = _const_vec(self.data.evals, 3 * o["id"], 3, "eval")
        elif t in ("airvalue", "airgroupvalue", "proofvalue"):
            value = self._stage_value(o)
        else:
            raise UnsupportedOperand(f"operand type {t!r} is not evaluated by the oracle")
        if len(value) != dim:
            raise OracleRefusal(f"{t} {o.get('id')}: JSON dim {dim}, loaded {len(value)} components")
        return value

    def _stage_value(self, o: Json) -> Value:
        key, buf = {"airvalue": ("airValuesMap", self.data.airvalues),
                    "airgroupvalue": ("airgroupValuesMap", self.data.airgroupvalues),
                    "proofvalue": ("proofValuesMap", self.data.proofvalues)}[o["type"]]
        values_map = self.si.get(key, [])
        i = o["id"]
        stage = values_map[i]["stage"] if i < len(values_map) else o.get("stage")
        dim = 1 if stage == 1 else 3
        return _const_vec(buf, _stage_position(values_map, i), dim, o["type"])


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def eval_expression(starkinfo: Json, expr: Json, data: DomainData, extended: bool) -> np.ndarray:
    """Evaluate one ``expressionsCode`` entry over ``data.n_rows`` rows (spec §8 steps 1-3).

    Returns the last op's result as uint64 ``(dim, D)``. ``extended`` selects the row stride
    ``prime * blowup`` (extended coset, e.g. Q) instead of ``prime``.
    """
    code = expr["code"]
    if not code:
        raise ValueError(f"expression {expr.get('expId')} has no code")
    reader = _Reader(starkinfo, data, extended)
    result: Value = ()
    for k, step in enumerate(code):
        bs = bin_order(step)
        if bs.arith == COPY:
            result = reader.load(bs.a)
        else:
            assert bs.b is not None
            result = apply_op(bs.ops_kind, bs.arith, reader.load(bs.a), reader.load(bs.b))
        dest = step["dest"]
        if dest["dim"] != len(result):
            raise OracleRefusal(f"expression {expr.get('expId')} step {k}: dest dim {dest['dim']}, "
                             f"computed {len(result)}")
        if dest["type"] == "tmp":
            reader.tmps[dest["id"]] = result
    n = data.n_rows
    return np.stack([np.broadcast_to(c, (n,)) for c in result]).astype(np.uint64, copy=True)


def find_expression(expressionsinfo: Json, exp_id: int) -> Json:
    """The ``expressionsCode`` entry with ``expId == exp_id``."""
    for expr in expressionsinfo["expressionsCode"]:
        if expr["expId"] == exp_id:
            return expr
    raise KeyError(f"expId {exp_id} not in expressionsCode")


def eval_q(starkinfo: Json, expressionsinfo: Json, data: DomainData) -> np.ndarray:
    """Q = the ``cExpId`` expression over the extended domain (spec §3): uint64 ``(3, NExt)``.

    Rows 1..2 are zero when the result is dim 1 (the generator's convention, spec §3 / §7.5).
    """
    n_ext = data.n_rows   # normally 2^nBitsExt; any power of two (strides stay opening * blowup)
    if n_ext <= 0 or n_ext & (n_ext - 1):
        raise ValueError(f"eval_q needs a power-of-two row count, got {n_ext}")
    res = eval_expression(starkinfo, find_expression(expressionsinfo, starkinfo["cExpId"]),
                          data, extended=True)
    out = np.zeros((3, n_ext), dtype=np.uint64)
    out[: res.shape[0]] = res
    return out


def _inverse(v: np.ndarray) -> Value:
    if v.shape[0] == 1:
        return (gl64.inv(v[0]),)
    if v.shape[0] == 3:
        return gl64.inv3((v[0], v[1], v[2]))
    raise ValueError(f"value dim {v.shape[0]} not in (1, 3)")


#: hintsInfo field pairs the prover evaluates as ``numerator * denominator^-1`` (im_col/im_airval:
#: numerator/denominator; gsum_col/gprod_col: *_air and *_direct; ARCHITECTURE.md "Store modes").
PAIR_FIELDS = (("numerator", "denominator"), ("numerator_air", "denominator_air"),
               ("numerator_direct", "denominator_direct"))


def _bin_dest_dim(expr: Json) -> int:
    """The ``.bin`` destDim of an expression: the dim of its last step's dest (spec §2.1)."""
    return int(expr["code"][-1]["dest"]["dim"])


def numerator_dims(expressionsinfo: Json) -> dict[int, set[int]]:
    """Denominator expId -> the dims of the ``tmp`` numerators ``hintsInfo`` pairs it with.

    Read from the raw JSON (spec §4.1, §4.3): a hint field with exactly one value is a param; a
    pair whose denominator is ``tmp`` and numerator is ``tmp`` is the WRITE + MUL_INV launch, and the
    numerator's dim is the bin destDim of its expression (``addParams(id, destDim)``), or the hint
    value's own ``dim`` when the expression has no code. Number numerators (WRITE_INV) and column
    numerators (interpreter only) never reach MUL_INV.
    """
    dims = {e["expId"]: _bin_dest_dim(e) for e in expressionsinfo.get("expressionsCode", []) if e.get("code")}
    out: dict[int, set[int]] = {}
    for hint in expressionsinfo.get("hintsInfo", []):
        fields = {f["name"]: f["values"] for f in hint.get("fields", [])}
        for num_name, den_name in PAIR_FIELDS:
            num, den = fields.get(num_name), fields.get(den_name)
            if not num or not den or len(num) != 1 or len(den) != 1:
                continue
            n, d = num[0], den[0]
            if n.get("op") == "tmp" and d.get("op") == "tmp":
                out.setdefault(int(d["id"]), set()).add(int(dims.get(n["id"], n.get("dim", 1))))
    return out


def mul_inv_numerator_dim(expressionsinfo: Json, exp_id: int) -> int:
    """The numerator dim MUL_INV of ``exp_id`` must assume: 1 if every tmp numerator paired with it
    is dim 1, else 3 (also when it is no denominator at all). Refuses (:class:`OracleRefusal`) a
    denominator paired with numerators of both dims: one kernel cannot serve both."""
    dims = numerator_dims(expressionsinfo).get(exp_id, set())
    if dims == {1, 3}:
        raise OracleRefusal(f"expression {exp_id} is the denominator of numerators of both dims 1 and 3")
    return 1 if dims == {1} else 3


def store(mode: int, v: np.ndarray, dest: np.ndarray, scalar: int,
          numerator_dim: int) -> np.ndarray:
    """What the prover's interpreter leaves in the destination for one fast-path launch (spec §4.2,
    §4.3; ARCHITECTURE.md "Store modes"), for every (mode, destDim, vdim) the ABI can be called with.

    ``v``: the expression value ``(vdim, N)``; ``dest``: current destination ``(destDim, N)``
    (read by MUL_INV: what WRITE of the numerator left there); ``scalar``: raw u64 numerator of
    WRITE_INV; ``numerator_dim``: dim of the numerator paired with this denominator (MUL_INV,
    destDim 3, vdim 3 only: 1 -> ``u_i * dest0`` as the interpreter does, 3 -> ``mul33(dest, u)``).

    destDim 1 keeps component 0 only (the interpreter stores ``dest.dim`` components), whatever
    vdim. Components 1, 2 of a dim-1 value are 0 where destDim 3 needs them (WRITE, WRITE_INV): the
    interpreter would store stale slot words there; the prover never asks for it (its ``dest.dim``
    is the max of the params' dims). Returns a new ``(destDim, N)`` array.
    """
    v = np.asarray(v, dtype=np.uint64)
    dest = np.asarray(dest, dtype=np.uint64)
    vdim, ddim = v.shape[0], dest.shape[0]
    if vdim not in (1, 3) or ddim not in (1, 3):
        raise ValueError(f"store: value dim {vdim} into dest dim {ddim}")
    out = np.zeros_like(dest)
    if mode == WRITE:
        k = min(vdim, ddim)
        out[:k] = v[:k]
        return out
    if mode not in (MUL_INV, WRITE_INV):
        raise ValueError(f"store: unknown mode {mode}")
    u = _inverse(v)
    if mode == MUL_INV:
        if ddim == 1:
            out[0] = gl64.mul(dest[0], u[0])
        elif vdim == 1:
            out[:] = gl64.mul31((dest[0], dest[1], dest[2]), u[0])
        elif numerator_dim == 1:
            out[:] = gl64.mul31(u, dest[0])
        elif numerator_dim == 3:
            out[:] = gl64.mul33((dest[0], dest[1], dest[2]), u)
        else:
            raise ValueError(f"store: numerator_dim {numerator_dim} not in (1, 3)")
        return out
    # WRITE_INV: the number param is dim 1 (spec §4.1): destDim 1 -> scalar * u0, else u_i * scalar
    s = np.array([scalar], dtype=np.uint64)
    if ddim == 1:
        out[0] = gl64.mul(s, u[0])
    else:
        zero = np.zeros_like(u[0])
        out[:] = gl64.mul31(u if vdim == 3 else (u[0], zero, zero), s)
    return out
