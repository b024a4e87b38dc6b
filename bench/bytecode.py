"""JSON expression -> interpreter bytecode, exactly as the setup's ``.bin`` writer encodes it.

Spec refs (``../shared/docs/semantics.md``): §1.3 (operand swap, ``ops``/``args`` encoding),
§2.1 (``.bin`` layout), §2.2 (type codes, temp slots, last-op rewrite). The writer is
``get_parser_args`` + ``get_id_maps`` of the setup (PA:86-205 and pil-info's temporaries):

* per op: ``ops[k]`` (u8: 0 = 1x1, 1 = 3x1, 2 = 3x3) and 8 u16 ``args``
  ``[arith, destSlot, aType, aIdx, aOff, bType, bIdx, bOff]`` with the swap rule;
* type codes with ``B = 1 + nStages + 3 + nCustomCommits``;
* temp slots from interval packing of the JSON tmp lifetimes ``[firstUse, lastUse]``: segments
  sorted by their end (stable, so by tmp id on ties), each placed into the existing slot whose last
  segment ends closest to its start among those it does not overlap (open intervals: segments that
  only touch at one op share a slot -> in-place ops), else a new slot; tmp1 and tmp3 pools are
  separate; ``destSlot`` = slot for tmp1, ``3 * slot`` for tmp3;
* numbers deduplicated (by value) into one ``numbers[]`` u64 table shared by all expressions of a
  ``.bin`` in ``expressionsCode`` order;
* the last op's dest of the Q / FRI / im-pol expressions rewritten to a fresh tmp
  (``id = tmpUsed``) before the slots are packed.

Nothing here reads a ``.bin``: tests compare this encoder with the real files.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from codegen import operands

Json = dict[str, Any]

OPS_11, OPS_31, OPS_33 = 0, 1, 2
ARITH = {"add": 0, "sub": 1, "mul": 2, "sub_swap": 3}
ARITH_NAMES = {v: k for k, v in ARITH.items()}
MULS_PER_OP = {OPS_11: 1, OPS_31: 3, OPS_33: 6}   # base-field multiplications of a `mul` op

# the writer's operand order: the product's one table and swap rule (codegen/operands.py)


class BytecodeError(ValueError):
    """The expression cannot be encoded (the writer would refuse it too, or we do not run it)."""


def rank(o: Json) -> int:
    try:
        return operands.rank_of(o["type"], o.get("dim", 1))
    except KeyError:
        raise BytecodeError(f"operand type {o.get('type')!r} has no rank in the .bin writer") from None


def buffer_commit_size(si: Json) -> int:
    """``B = 1 + nStages + 3 + nCustomCommits`` (spec §2.2)."""
    return 1 + si["nStages"] + 3 + len(si.get("customCommits", []))


def _stage_position(values_map: list[Json], i: int) -> int:
    """Prefix sum of slots (stage 1: 1, else 3) over the entries before ``i`` that exist
    (diff_buses reads airgroupvalue ids past the end of a 1-entry map: position 3)."""
    return sum(operands.value_slots(e["stage"]) for e in values_map[:i])


class Numbers:
    """The ``numbers[]`` table: values deduplicated in first-use order (PA: numbers_index)."""

    def __init__(self) -> None:
        self.values: list[int] = []
        self._index: dict[int, int] = {}

    def index(self, value: int) -> int:
        if value not in self._index:
            self._index[value] = len(self.values)
            self.values.append(value)
        return self._index[value]

    def array(self) -> np.ndarray:
        return np.array(self.values or [0], dtype=np.uint64)


def _u64(v: Any) -> int:
    x = int(v)
    if not 0 <= x < 1 << 64:
        raise BytecodeError(f"number {v!r} is not a u64 literal")
    return x


@dataclass
class Bytecode:
    """One expression's bytecode (section-1 entry of a ``.bin``)."""

    exp_id: int
    ops: list[int]                 # kinds 0/1/2
    args: list[int]                # 8 per op
    numbers: list[int]             # the numbers table the args index (shared or own)
    n_temp1: int
    n_temp3: int
    dest_dim: int
    dest_id: int                   # slot of the last op's dest (not x3 for tmp3, as the writer)
    tmp_slot1: dict[int, int] = field(default_factory=dict)   # JSON tmp id -> tmp1 slot
    tmp_slot3: dict[int, int] = field(default_factory=dict)   # JSON tmp id -> tmp3 slot

    @property
    def n_ops(self) -> int:
        return len(self.ops)

    def op(self, k: int) -> tuple[int, tuple[int, ...]]:
        return self.ops[k], tuple(self.args[8 * k: 8 * k + 8])

    def ops_array(self) -> np.ndarray:
        return np.array(self.ops, dtype=np.uint8)

    def args_array(self) -> np.ndarray:
        return np.array(self.args, dtype=np.uint16)

    def numbers_array(self) -> np.ndarray:
        return np.array(self.numbers or [0], dtype=np.uint64)

    @property
    def out_dim(self) -> int:
        return 1 if self.ops[-1] == OPS_11 else 3

    def muls_per_row(self) -> int:
        """Base-field multiplications per row (3x3 mul = 6, 3x1 = 3, 1x1 = 1)."""
        return sum(MULS_PER_OP[k] for k, a in zip(self.ops, self.args[::8]) if a == ARITH["mul"])


# ------------------------------------------------------------------------------- temp slots
def _intersecting(s1: tuple[int, int, int], s2: tuple[int, int, int]) -> bool:
    return s2[0] < s1[1] and s1[0] < s2[1]


def pack_segments(segments: list[tuple[int, int, int]]) -> dict[int, int]:
    """[(first, last, tmp id)] -> {tmp id: slot}: the writer's closest-fit packing."""
    subsets: list[list[tuple[int, int, int]]] = []
    for seg in sorted(segments, key=lambda s: s[1]):        # stable: ties keep tmp-id order
        best, best_d = None, None
        for i, sub in enumerate(subsets):
            last = sub[-1]
            if _intersecting(seg, last):
                continue
            d = abs(last[1] - seg[0])
            if best_d is None or d < best_d:
                best, best_d = i, d
        if best is None:
            subsets.append([seg])
        else:
            subsets[best].append(seg)
    return {s[2]: slot for slot, sub in enumerate(subsets) for s in sub}


def tmp_slots(code: list[Json]) -> tuple[dict[int, int], dict[int, int], int, int]:
    """JSON tmp ids -> slots for the tmp1 and tmp3 pools; (slot1, slot3, count1, count3)."""
    life1: dict[int, list[int]] = {}
    life3: dict[int, list[int]] = {}
    for j, step in enumerate(code):
        for o in [step["dest"], *step["src"]]:
            if o["type"] != "tmp":
                continue
            life = life1 if o["dim"] == 1 else life3
            if o["dim"] not in (1, 3):
                raise BytecodeError(f"tmp {o['id']} has dim {o['dim']}")
            if o["id"] in life:
                life[o["id"]][1] = j
            else:
                life[o["id"]] = [j, j]
    s1 = pack_segments([(a, b, i) for i, (a, b) in sorted(life1.items())])
    s3 = pack_segments([(a, b, i) for i, (a, b) in sorted(life3.items())])
    return s1, s3, len(set(s1.values())), len(set(s3.values()))


# ------------------------------------------------------------------------------- encoding
def _swap(step: Json) -> tuple[str, list[Json]]:
    op, src = step["op"], list(step["src"])
    if len(src) != 2:
        raise BytecodeError(f"op {op!r} with {len(src)} sources")
    a, b = src
    rank(a), rank(b)      # an unknown operand type is a BytecodeError
    arith, x, y = operands.ordered(op, a, b, operands.swapped(a["type"], a.get("dim", 1),
                                                              b["type"], b.get("dim", 1)))
    return arith, [x, y]


class _Encoder:
    def __init__(self, si: Json, numbers: Numbers, s1: dict[int, int], s3: dict[int, int]):
        self.si = si
        self.numbers = numbers
        self.s1, self.s3 = s1, s3
        self.n_stages = si["nStages"]
        self.base = buffer_commit_size(si)
        self.openings = list(si["openingPoints"])

    def _opening(self, o: Json) -> int:
        try:
            return self.openings.index(o["prime"])
        except ValueError:
            raise BytecodeError(f"opening {o.get('prime')} not in openingPoints {self.openings}") from None

    def dest(self, o: Json) -> int:
        if o["type"] != "tmp":
            raise BytecodeError(f"destination of type {o['type']!r} (only tmp, or the rewritten last op)")
        return self.s1[o["id"]] if o["dim"] == 1 else 3 * self.s3[o["id"]]

    def src(self, o: Json) -> tuple[int, int, int]:
        t, si = o["type"], self.si
        if t == "tmp":
            return (self.base, self.s1[o["id"]], 0) if o["dim"] == 1 else \
                   (self.base + 1, 3 * self.s3[o["id"]], 0)
        if t == "const":
            return 0, o["id"], self._opening(o)
        if t == "cm":
            pol = si["cmPolsMap"][o["id"]]
            if pol["dim"] != o["dim"]:
                raise BytecodeError(f"cm {o['id']}: JSON dim {o['dim']} != cmPolsMap dim {pol['dim']}")
            return pol["stage"], pol["stagePos"], self._opening(o)
        if t == "custom":
            return self.n_stages + 4 + o["commitId"], o["id"], self._opening(o)
        if t == "Zi":
            return self.n_stages + 2, 1 + o.get("boundaryId", 0), 0
        if t == "xDivXSubXi":
            return self.n_stages + 3, o["id"], 0
        if t == "public":
            return self.base + 2, o["id"], 0
        if t == "number":
            return self.base + 3, self.numbers.index(_u64(o["value"])), 0
        if t == "airvalue":
            return self.base + 4, _stage_position(si.get("airValuesMap", []), o["id"]), 0
        if t == "proofvalue":
            return self.base + 5, _stage_position(si.get("proofValuesMap", []), o["id"]), 0
        if t == "airgroupvalue":
            return self.base + 6, _stage_position(si.get("airgroupValuesMap", []), o["id"]), 0
        if t == "challenge":
            return self.base + 7, 3 * o["id"], 0
        if t == "eval":
            return self.base + 8, 3 * o["id"], 0
        raise BytecodeError(f"operand type {t!r} has no .bin type code")


def rewrites_last(si: Json, exp_id: int) -> bool:
    """Whether the writer rewrites the last dest to a fresh tmp (Q, FRI, im-pol expressions)."""
    return (exp_id == si.get("cExpId") or exp_id == si.get("friExpId")
            or any(c.get("expId") == exp_id for c in si.get("cmPolsMap", [])))


def prepared_code(si: Json, expr: Json, rewrite_last: bool | None, copy: str) -> list[Json]:
    code = [dict(s) for s in expr["code"]]
    if not code:
        raise BytecodeError(f"expression {expr.get('expId')} is empty")
    if rewrite_last is None:
        rewrite_last = rewrites_last(si, expr["expId"])
    if rewrite_last:
        used = expr.get("tmpUsed")
        if used is None:
            used = 1 + max([o["id"] for s in code for o in [s["dest"], *s["src"]] if o["type"] == "tmp"],
                           default=-1)
        last = dict(code[-1])
        last["dest"] = {"type": "tmp", "id": int(used), "dim": code[-1]["dest"]["dim"]}
        code[-1] = last
    for k, s in enumerate(code):
        if s["op"] == "copy":
            if copy == "mul1":   # dest = src0 * 1: the raw gl64 mul by 1 is the identity (spec §1.1)
                code[k] = {"op": "mul", "dest": s["dest"],
                           "src": [s["src"][0], {"type": "number", "value": "1", "dim": 1}]}
            else:
                raise BytecodeError(f"expression {expr.get('expId')} op {k}: `copy` (the .bin writer "
                                    "encodes it with 5 args that the interpreter misparses, spec §7.3)")
        elif s["op"] not in ("add", "sub", "mul"):
            raise BytecodeError(f"expression {expr.get('expId')} op {k}: unknown op {s['op']!r}")
    return code


def compile_expression(si: Json, expr: Json, numbers: Numbers | None = None,
                       rewrite_last: bool | None = None, copy: str = "raise") -> Bytecode:
    """Encode one ``expressionsCode`` entry as the ``.bin`` writer does.

    ``numbers``: the table to index into (shared across a ``.bin``); a fresh one when None.
    ``rewrite_last``: None = the writer's rule (:func:`rewrites_last`). ``copy``: ``"raise"``
    or ``"mul1"`` (encode ``copy`` as a multiplication by the number 1, a raw identity).
    """
    numbers = numbers if numbers is not None else Numbers()
    code = prepared_code(si, expr, rewrite_last, copy)
    s1, s3, c1, c3 = tmp_slots(code)
    enc = _Encoder(si, numbers, s1, s3)
    ops: list[int] = []
    args: list[int] = []
    for k, step in enumerate(code):
        op, (a, b) = _swap(step)
        da, db = a.get("dim", 1), b.get("dim", 1)
        kind = {(1, 1): OPS_11, (3, 1): OPS_31, (3, 3): OPS_33}.get((da, db))
        ddim = step["dest"]["dim"]
        if kind is None or ddim != max(da, db):
            raise BytecodeError(f"expression {expr.get('expId')} op {k}: dest dim {ddim} with sources "
                                f"({da}, {db}) is not an operation of the .bin")
        dslot = enc.dest(step["dest"])
        ops.append(kind)
        args.extend([ARITH[op], dslot, *enc.src(a), *enc.src(b)])
    for v in args:
        if not 0 <= v < 1 << 16:
            raise BytecodeError(f"expression {expr.get('expId')}: arg {v} does not fit a u16")
    last = code[-1]["dest"]
    dest_id = s1[last["id"]] if last["dim"] == 1 else s3[last["id"]]
    return Bytecode(expr["expId"], ops, args, numbers.values, c1, c3, last["dim"], dest_id, s1, s3)


def compile_bin(si: Json, ei: Json, copy: str = "raise") -> tuple[dict[int, Bytecode], list[int],
                                                                    dict[int, str]]:
    """Every expression in ``expressionsCode`` order with one shared numbers table, as section 1
    of the ``.bin``. Returns ({expId: Bytecode}, numbers, {expId: reason} for those refused)."""
    numbers = Numbers()
    out: dict[int, Bytecode] = {}
    refused: dict[int, str] = {}
    for expr in ei["expressionsCode"]:
        try:
            out[expr["expId"]] = compile_expression(si, expr, numbers, copy=copy)
        except BytecodeError as e:
            refused[expr["expId"]] = str(e)
    return out, numbers.values, refused


def find_expression(ei: Json, exp_id: int) -> Json:
    for e in ei["expressionsCode"]:
        if e["expId"] == exp_id:
            return e
    raise KeyError(f"expId {exp_id} not in expressionsCode")


def q_bytecode(si: Json, ei: Json) -> Bytecode:
    """The Q (cExpId) expression with its own numbers table, ready for the interpreter."""
    bc = compile_expression(si, find_expression(ei, si["cExpId"]), Numbers(), rewrite_last=True)
    check_runnable(si, bc)
    return bc


# ------------------------------------------------------------------------------- checks
def check_runnable(si: Json, bc: Bytecode) -> None:
    """Operand types the GPU interpreter of Q evaluates (no custom commits, no xDivXSubXi)."""
    n_stages = si["nStages"]
    base = buffer_commit_size(si)
    for k in range(bc.n_ops):
        _, a = bc.op(k)
        for t, idx in ((a[2], a[3]), (a[5], a[6])):
            if n_stages + 3 <= t < base:
                raise BytecodeError(f"expId {bc.exp_id} op {k}: operand type {t} "
                                    "(xDivXSubXi / custom commit) is not evaluated on the GPU")
            if t == n_stages + 2 and idx != 1:
                raise BytecodeError(f"expId {bc.exp_id} op {k}: Zi boundary {idx - 1} (only everyRow)")
            if t > base + 8:
                raise BytecodeError(f"expId {bc.exp_id} op {k}: unknown operand type {t}")


def slot_errors(code: list[Json], bc: Bytecode) -> list[str]:
    """Replay the slot assignment: every tmp read must find the value of that JSON tmp in its slot
    (sources are read before the dest is written). [] = a valid allocation."""
    errs: list[str] = []
    holder1: dict[int, int] = {}
    holder3: dict[int, int] = {}
    for k, step in enumerate(code):
        _, a = bc.op(k)
        for o in step["src"]:
            if o["type"] == "tmp":
                s, h = (bc.tmp_slot1, holder1) if o["dim"] == 1 else (bc.tmp_slot3, holder3)
                if h.get(s[o["id"]]) != o["id"]:
                    errs.append(f"op {k}: tmp {o['id']} read from slot {s[o['id']]} holding "
                                f"{h.get(s[o['id']])}")
        d = step["dest"]
        if d["type"] == "tmp" or k == len(code) - 1:
            kind = bc.ops[k]
            pool_is_1 = kind == OPS_11
            slot = a[1] if pool_is_1 else a[1] // 3
            (holder1 if pool_is_1 else holder3)[slot] = d.get("id", -1) if d["type"] == "tmp" else -1
    return errs


def distinct_columns(si: Json, bc: Bytecode) -> set[tuple[str, int, int]]:
    """Distinct trace columns the expression reads, whatever the opening: ('cm', stage, col),
    ('const', 0, col), ('zi', 0, boundary)."""
    n_stages = si["nStages"]
    cols: set[tuple[str, int, int]] = set()
    for k in range(bc.n_ops):
        kind, a = bc.op(k)
        dims = {OPS_11: (1, 1), OPS_31: (3, 1), OPS_33: (3, 3)}[kind]
        for (t, idx), dim in zip(((a[2], a[3]), (a[5], a[6])), dims):
            if t == 0:
                cols.add(("const", 0, idx))
            elif 1 <= t <= n_stages + 1:
                cols.update(("cm", t, idx + d) for d in range(dim))
            elif t == n_stages + 2:
                cols.add(("zi", 0, idx - 1))
    return cols


def disassemble(bc: Bytecode, si: Json) -> Iterable[str]:
    """Readable listing (debugging aid)."""
    base = buffer_commit_size(si)
    ns = si["nStages"]
    names = {0: "const", ns + 2: "Zi", ns + 3: "xDivXSubXi", base: "tmp1", base + 1: "tmp3",
             base + 2: "public", base + 3: "number", base + 4: "airvalue", base + 5: "proofvalue",
             base + 6: "airgroupvalue", base + 7: "challenge", base + 8: "eval"}
    names.update({s: f"cm{s}" for s in range(1, ns + 2)})
    for k in range(bc.n_ops):
        kind, a = bc.op(k)
        def opnd(t, i, o):
            n = names.get(t, f"custom{t - ns - 4}")
            return f"{n}[{i}]" + (f"@{o}" if o else "")
        yield (f"{k:5d} {('1x1', '3x1', '3x3')[kind]} {ARITH_NAMES[a[0]]:8s} -> {a[1]:4d}  "
               f"{opnd(a[2], a[3], a[4])}, {opnd(a[5], a[6], a[7])}")
