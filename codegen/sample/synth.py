"""Synthetic provingKeys: random but valid expressions over a described AIR (spec §1.3, §2-§4, §6).

The JSON written here follows the real setup's files (`../shared/pk`): the same keys in the same
order, the same operand shapes, SSA tmp ids, the Q expression built as a Horner sum over the
constraints with `std_vc` and closed by `mul(cExp, Zi[everyRow])` into `{"type": "q"}`, an FRI
expression over evals and `xDivXSubXi`, and trace-domain expressions referenced by `im_col`,
`gsum_col`, `gprod_col` and `gsum_member_data` hints. Everything is drawn from one
`random.Random(seed)`, so a build is byte-identical on every run.

API
  Val                                   an operand: its JSON dict and dim
  Code(rng, first_tmp=0, prime=True, exp_ids=None)
      .op(kind, a, b, order=None)       append add|sub|mul; order None = random JSON operand order
      .replay(ops) / .closure(val)      re-emit another expression's ops / a value's cone (renumbered)
      .ops, .tmp_used                   the JSON code list and its tmpUsed
  Palette(...).pick(maxdim)             random leaf of an AIR
  random_dag(code, n_ops, out_dim, palette, far=None, p_far=0.0) -> Val
  AirParams + make_air(params) -> (starkinfo, expressionsinfo)
  validate(starkinfo, expressionsinfo)  structural checks (raises SynthError)
  write_key(root, [(rel_dir, base, starkinfo, expressionsinfo), ...]) -> [paths]
  sample_airs() / build_sample(root)    the committed provingkey-sample/
  build_large(root, n_ops, n_bits=5)    one AIR with a Q of ~n_ops ops (benchmarks)

CLI: ``python -m codegen.sample.synth OUTDIR`` regenerates the sample;
``python -m codegen.sample.synth --large-ops N [--n-bits B] OUTDIR`` writes one large AIR.
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

from codegen import operands
from codegen.discover import phase_of

P = 0xFFFF_FFFF_0000_0001
P_MINUS_1 = str(P - 1)          # "18446744069414584320"
N_STAGES = 2                    # asserted by the prover (spec, global facts)
Q_STAGE = N_STAGES + 1

#: (name, stage, stageId); the global challengesMap index is the position.
CHALLENGES = (
    ("std_alpha", 2, 0), ("std_gamma", 2, 1), ("std_vc", 3, 0),
    ("std_xi", 4, 0), ("std_vf1", 5, 0), ("std_vf2", 5, 1),
)
ALPHA, GAMMA, VC, XI, VF1, VF2 = range(6)

SAMPLE_NAME = "synth"           # provingKey/<name>/...
SAMPLE_SEED = 20240611

SECURITY = {"proximityGap": 0.003333333333333333, "proximityParameter": 0.28955988548011913,
            "regime": "JBR"}


class SynthError(ValueError):
    """A generated (or checked) key is inconsistent."""


# --------------------------------------------------------------------------------- operand order
def rank(src: dict) -> int:
    """Operand rank of the `.bin` writer's swap rule (operands.py; spec §1.3)."""
    try:
        return operands.rank_of(src["type"], src.get("dim", 1))
    except KeyError:
        raise SynthError(f"no rank for operand type {src['type']!r}") from None


def swapped(a: dict, b: dict) -> bool:
    """Does the `.bin` writer swap JSON (a, b)?  `dimA != dimB ? dimB > dimA : rank(A) > rank(B)`."""
    rank(a), rank(b)
    return operands.swapped(a["type"], a.get("dim", 1), b["type"], b.get("dim", 1))


# ------------------------------------------------------------------------------------- builder
@dataclass(frozen=True)
class Val:
    """An operand as it appears in a `src` list (tmps: the reference form)."""

    js: dict
    dim: int

    @property
    def type(self) -> str:
        return self.js["type"]

    @property
    def tmp_id(self) -> int | None:
        return self.js["id"] if self.js["type"] == "tmp" else None


class _Counter:
    """Running pil expression id: tmp references carry one (`expId`), expressions take the next."""

    def __init__(self, start: int = 0):
        self.n = start

    def next(self) -> int:
        v = self.n
        self.n += 1
        return v


class Code:
    """One SSA code list under construction (an expressionsCode entry or a constraint).

    `prime=True` writes `"prime": 0` on tmp dests/references as the setup does for Q and
    trace-domain expressions (the FRI expression has none); `exp_ids` (a shared counter) adds
    `expId` to tmp references.
    """

    def __init__(self, rng: random.Random, *, first_tmp: int = 0, prime: bool = True,
                 exp_ids: _Counter | None = None):
        self.rng = rng
        self.ops: list[dict] = []
        self.next_tmp = first_tmp
        self.prime = prime
        self.exp_ids = exp_ids
        self.def_op: dict[int, int] = {}      # tmp id -> index of its defining op
        self.cone: dict[int, int] = {}        # tmp id -> op count of its cone (over-counted)

    def _ref(self, tid: int, dim: int, bare: bool) -> Val:
        if bare:
            return Val({"type": "tmp", "id": tid, "dim": dim}, dim)
        js: dict = {"type": "tmp"}
        if self.exp_ids is not None:
            js["expId"] = self.exp_ids.next()
        js["id"] = tid
        if self.prime:
            js["prime"] = 0
        js["dim"] = dim
        return Val(js, dim)

    def op(self, kind: str, a: Val, b: Val, *, order: bool | None = None,
           tmp_id: int | None = None, bare: bool = False) -> Val:
        """dest = a <kind> b; JSON src order (a, b) if `order` is False, (b, a) if True, random if None.
        `bare`: dest/reference without prime/expId (the setup's last op of Q and FRI)."""
        if kind not in ("add", "sub", "mul"):
            raise SynthError(f"unknown op {kind!r}")
        if order is None:
            order = self.rng.random() < 0.5
        srcs = [b, a] if order else [a, b]
        dim = max(a.dim, b.dim)
        if tmp_id is None:
            tmp_id = self.next_tmp
            self.next_tmp += 1
        else:
            self.next_tmp = max(self.next_tmp, tmp_id + 1)
        if tmp_id in self.def_op:
            raise SynthError(f"tmp {tmp_id} written twice")
        if bare or not self.prime:
            dest = {"type": "tmp", "id": tmp_id, "dim": dim}
        else:
            dest = {"type": "tmp", "prime": 0, "id": tmp_id, "dim": dim}
        cone = 1
        for s in (a, b):
            if s.tmp_id is not None:
                cone += self.cone[s.tmp_id]
        self.def_op[tmp_id] = len(self.ops)
        self.cone[tmp_id] = cone
        self.ops.append({"op": kind, "dest": dest, "src": [dict(s.js) for s in srcs]})
        return self._ref(tmp_id, dim, bare)

    def op_q(self, cexp: Val, zi: Val, q_dim: int) -> None:
        """The Q expression's last op: `mul(cExp, Zi[everyRow])` into `{"type": "q"}`."""
        self.ops.append({"op": "mul", "dest": {"type": "q", "id": 0, "dim": q_dim},
                         "src": [dict(cexp.js), dict(zi.js)]})

    def replay(self, ops: list[dict]) -> Val:
        """Re-emit `ops` (another expression's code) with fresh tmp ids, same operand order."""
        m: dict[int, Val] = {}
        last = None
        for o in ops:
            srcs = [m[s["id"]] if s["type"] == "tmp" else Val(dict(s), s.get("dim", 1))
                    for s in o["src"]]
            last = self.op(o["op"], srcs[0], srcs[1], order=False)
            m[o["dest"]["id"]] = last
        if last is None:
            raise SynthError("replay of an empty expression")
        return last

    @property
    def tmp_used(self) -> int:
        ids = [o["dest"]["id"] for o in self.ops if o["dest"]["type"] == "tmp"]
        return max(ids) + 1 if ids else 0

    def closure(self, result: Val) -> list[dict]:
        """The ops `result` depends on, in order, renumbered from tmp 0 (a debug constraint)."""
        need: set[int] = set()
        stack = [result.tmp_id] if result.tmp_id is not None else []
        while stack:
            i = self.def_op[stack.pop()]
            if i in need:
                continue
            need.add(i)
            stack.extend(s["id"] for s in self.ops[i]["src"] if s["type"] == "tmp")
        ren: dict[int, int] = {}
        out = []
        for i in sorted(need):
            o = self.ops[i]
            src = []
            for s in o["src"]:
                s = dict(s)
                if s["type"] == "tmp":
                    s["id"] = ren[s["id"]]
                src.append(s)
            dest = dict(o["dest"])
            ren[dest["id"]] = dest["id"] = len(ren)
            out.append({"op": o["op"], "dest": dest, "src": src})
        return out


# ------------------------------------------------------------------------------------- leaves
def number(v: int | str) -> Val:
    return Val({"type": "number", "value": str(v), "dim": 1}, 1)


def challenge(i: int) -> Val:
    _, stage, stage_id = CHALLENGES[i]
    return Val({"type": "challenge", "id": i, "stageId": stage_id, "dim": 3, "stage": stage}, 3)


def eval_(i: int) -> Val:
    return Val({"type": "eval", "id": i, "dim": 3}, 3)


def zi(boundary_id: int) -> Val:
    return Val({"type": "Zi", "boundaryId": boundary_id, "dim": 1}, 1)


def xdiv(idx: int, opening: int) -> Val:
    return Val({"type": "xDivXSubXi", "id": idx, "opening": opening, "dim": 3}, 3)


def public(i: int) -> Val:
    return Val({"type": "public", "id": i, "dim": 1}, 1)


def const(i: int, prime: int = 0) -> Val:
    return Val({"type": "const", "id": i, "prime": prime, "dim": 1}, 1)


def _staged(t: str, i: int, stage: int) -> Val:
    d = 1 if stage == 1 else 3
    return Val({"type": t, "id": i, "stage": stage, "dim": d}, d)


def rand_number(rng: random.Random) -> str:
    """0, 1, small ints, p-1, 2^32-1 / 2^32 (the two-encoding edge), large values < p."""
    r = rng.random()
    if r < 0.14:
        return "0"
    if r < 0.34:
        return "1"
    if r < 0.60:
        return str(rng.randint(2, 16))
    if r < 0.72:
        return P_MINUS_1
    if r < 0.76:
        return str(rng.choice((0xFFFF_FFFF, 1 << 32, P - 2)))
    return str(rng.randrange(1 << 32, P - 1))


@dataclass
class Palette:
    """Leaves a random DAG may draw, with weights per category (dims decided by the category)."""

    rng: random.Random
    openings: tuple[int, ...]
    cm1: list[int] = field(default_factory=list)       # polsMap ids of dim-1 columns
    cm3: list[int] = field(default_factory=list)       # polsMap ids of dim-3 (stage-2) columns
    consts: list[int] = field(default_factory=list)
    publics: int = 0
    airvalues: list[tuple[int, int]] = field(default_factory=list)        # (id, stage)
    airgroupvalues: list[tuple[int, int]] = field(default_factory=list)
    proofvalues: list[tuple[int, int]] = field(default_factory=list)
    challenges: list[int] = field(default_factory=list)
    numbers: bool = True

    def opening(self) -> int:
        if 0 in self.openings and self.rng.random() < 0.6:
            return 0
        return self.rng.choice(self.openings)

    def _cats(self, maxdim: int) -> list[tuple[str, float, Callable[[], Val]]]:
        r = self.rng
        cats: list[tuple[str, float, Callable[[], Val]]] = []
        if self.cm1:
            cats.append(("cm1", 0.32, lambda: Val({"type": "cm", "id": r.choice(self.cm1),
                                                   "prime": self.opening(), "dim": 1}, 1)))
        if self.consts:
            cats.append(("const", 0.08, lambda: const(r.choice(self.consts), self.opening())))
        if self.numbers:
            cats.append(("number", 0.12, lambda: number(rand_number(r))))
        if self.publics:
            cats.append(("public", 0.05, lambda: public(r.randrange(self.publics))))
        for t, lst, w in (("airvalue", self.airvalues, 0.04), ("proofvalue", self.proofvalues, 0.03),
                          ("airgroupvalue", self.airgroupvalues, 0.04)):
            for want in (1, 3):
                sub = [x for x in lst if (1 if x[1] == 1 else 3) == want]
                if sub and want <= maxdim:
                    cats.append((t, w, lambda t=t, sub=sub: _staged(t, *r.choice(sub))))
        if maxdim == 3:
            if self.cm3:
                cats.append(("cm3", 0.14, lambda: Val({"type": "cm", "id": r.choice(self.cm3),
                                                       "prime": self.opening(), "dim": 3}, 3)))
            if self.challenges:
                cats.append(("challenge", 0.12, lambda: challenge(r.choice(self.challenges))))
        return cats

    def pick(self, maxdim: int = 3, *, no_number: bool = False) -> Val:
        cats = [c for c in self._cats(maxdim) if not (no_number and c[0] == "number")]
        if not cats:
            raise SynthError("empty palette")
        tot = sum(w for _, w, _ in cats)
        x = self.rng.random() * tot
        for _, w, f in cats:
            x -= w
            if x <= 0:
                return f()
        return cats[-1][2]()


def _same(a: Val, b: Val) -> bool:
    if a.type == "tmp" or b.type == "tmp":
        return a.tmp_id == b.tmp_id
    return a.js == b.js


def random_dag(code: Code, n_ops: int, out_dim: int, pal: Palette, *,
               far: list[Val] | None = None, p_far: float = 0.0) -> Val:
    """Append about `n_ops` random ops (every tmp is consumed) and return a value of `out_dim`.

    Operands: an unconsumed tmp of this DAG (p 0.5), an earlier tmp from `far` (p `p_far`:
    long live ranges), a recent tmp of this DAG (p 0.08, sharing), else a leaf. JSON operand order
    is random, so both orders of mixed dims and of equal-dim different-rank operands occur.
    """
    rng = code.rng
    unused: list[Val] = []
    recent: list[Val] = []
    far = [v for v in (far or []) if v.dim <= out_dim]

    def pick(avoid_number: bool) -> Val:
        r = rng.random()
        cand = [v for v in unused[-6:]]
        if cand and r < 0.5:
            v = rng.choice(cand)
            unused.remove(v)
            return v
        if far and r < 0.5 + p_far:
            return rng.choice(far)
        if recent and r < 0.58 + p_far:
            return rng.choice(recent[-24:])
        return pal.pick(out_dim, no_number=avoid_number)

    for _ in range(max(1, n_ops)):
        kind = rng.choices(("add", "sub", "mul"), (0.4, 0.22, 0.38))[0]
        a = pick(False)
        b = pick(a.type == "number")
        for _ in range(4):
            if not (kind == "sub" and _same(a, b)):
                break
            b = pal.pick(out_dim, no_number=a.type == "number")    # x - x would be a constant 0
        v = code.op(kind, a, b)
        unused.append(v)
        recent.append(v)
    res = unused.pop(0) if unused else recent[-1]
    while unused:
        res = code.op(rng.choice(("add", "add", "sub", "mul")), res, unused.pop(0))
    if res.dim < out_dim:                   # lift to dim 3 with a dim-3 leaf (a challenge if any)
        lift = challenge(rng.choice(pal.challenges)) if pal.challenges else None
        for _ in range(64):
            if lift is not None and lift.dim == 3:
                break
            lift = pal.pick(3)
        if lift is None or lift.dim != 3:
            raise SynthError("cannot lift a DAG to dim 3 without a dim-3 leaf")
        res = code.op("mul", res, lift)
    return res


# --------------------------------------------------------------------------------- AIR builder
@dataclass(frozen=True)
class AirParams:
    """What `make_air` builds. im_cols: one entry per `im_col` hint, the numerator kind:
    "d1" (dim-1 tmp), "d3" (dim-3 tmp), "number" (p-1) or "cm" (a stage-1 column)."""

    name: str
    seed: int
    airgroup_id: int = 0
    air_id: int = 0
    n_bits: int = 4
    blowup_bits: int = 1
    q_ops: int = 100                          # target size of the Q expression
    q_deg: int = 2
    n_cm1: int = 4
    n_const: int = 2                          # const 0 is __L1
    opening_points: tuple[int, ...] = (-1, 0, 1)
    im_cols: tuple[str, ...] = ()
    n_impol: int = 0                          # imPol stage-2 columns (expression with a cm dest)
    gsum: bool = False
    gprod: bool = False
    member_hints: bool = False                # gsum_member_data with tmp selector / references
    n_publics: int = 0
    airvalue_stages: tuple[int, ...] = ()
    airgroupvalue_stages: tuple[int, ...] = ()
    proofvalue_stages: tuple[int, ...] = ()
    q_proofvalues: bool = False               # proofvalues also in Q (the Rust tool refuses those)
    extra_boundaries: tuple[str, ...] = ()    # e.g. ("firstRow",): constraints * Zi[1] in Q
    trace_ops: tuple[int, int] = (3, 18)      # size range of trace-domain expressions
    constraint_ops: tuple[int, int] = (3, 30)  # size range of random constraints
    p_far: float = 0.0                        # reuse of early Q temps (long live ranges)
    q_first_tmp: int = 0


class _Air:
    """Column layout of one AIR and the helpers that read it."""

    def __init__(self, p: AirParams):
        self.p = p
        self.openings = tuple(sorted(set(p.opening_points)))
        if 0 not in self.openings:
            raise SynthError("openingPoints must contain 0")
        self.prev = -1 if -1 in self.openings else 0
        self.next = 1 if 1 in self.openings else 0
        self.cm: list[dict] = []
        stage_pos = {1: 0, 2: 0, 3: 0}
        stage_id = {1: 0, 2: 0, 3: 0}

        def add(stage: int, name: str, dim: int, extra: dict | None = None, q: bool = False) -> int:
            pid = len(self.cm)
            if q:
                e = {"stage": stage, "name": name, "dim": dim, "polsMapId": pid,
                     "stagePos": stage_pos[stage], "stageId": stage_id[stage]}
            else:
                e = {"stage": stage, "name": name, "dim": dim, "polsMapId": pid,
                     "stageId": stage_id[stage]}
                e.update(extra or {})
                e["stagePos"] = stage_pos[stage]
            stage_pos[stage] += dim
            stage_id[stage] += 1
            self.cm.append(e)
            return pid

        n = p.name
        self.cm1 = [add(1, f"{n}.{_col_name(i)}", 1) for i in range(p.n_cm1)]
        self.gsum_col = add(2, f"{n}.gsum", 3) if p.gsum else None
        self.gprod_col = add(2, f"{n}.gprod", 3) if p.gprod else None
        self.im = [add(2, f"{n}.im", 3, {"lengths": [k]}) for k in range(len(p.im_cols))]
        self.impol = [add(2, f"{n}.ImPol", 3, {"imPol": True, "expId": -1}) for _ in range(p.n_impol)]
        self.q_cols = [add(3, f"Q{k}", 3, q=True) for k in range(p.q_deg)]
        self.sections = {"const": p.n_const, "cm1": stage_pos[1], "cm2": stage_pos[2],
                         "cm3": stage_pos[3]}
        self.consts = list(range(p.n_const))
        self.av = [(i, s) for i, s in enumerate(p.airvalue_stages)]
        self.agv = [(i, s) for i, s in enumerate(p.airgroupvalue_stages)]
        self.pv = [(i, s) for i, s in enumerate(p.proofvalue_stages)]

    def cm_val(self, pid: int, prime: int = 0) -> Val:
        d = self.cm[pid]["dim"]
        return Val({"type": "cm", "id": pid, "prime": prime, "dim": d}, d)

    def hint_cm(self, pid: int, prime: int = 0) -> dict:
        c = self.cm[pid]
        return {"op": "cm", "id": pid, "stageId": c["stageId"], "rowOffset": prime,
                "stage": c["stage"], "dim": c["dim"], "rowOffsetIndex": self.openings.index(prime),
                "pos": []}

    def palette(self, rng: random.Random, *, cm3: Iterable[int] = (), pv: bool = False) -> Palette:
        p = self.p
        return Palette(
            rng, self.openings, cm1=list(self.cm1), cm3=list(cm3), consts=list(self.consts),
            publics=p.n_publics, airvalues=list(self.av), airgroupvalues=list(self.agv),
            proofvalues=list(self.pv) if pv else [], challenges=[ALPHA, GAMMA])


def _col_name(i: int) -> str:
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(97 + r) + s
    return s


def _h_tmp(e: dict) -> dict:
    return {"op": "tmp", "id": e["expId"], "dim": _out_dim(e), "pos": []}


def _h_num(v: str, pos: list | None = None) -> dict:
    return {"op": "number", "value": v, "pos": pos or []}


def _h_str(s: str, pos: list | None = None) -> dict:
    return {"op": "string", "string": s, "pos": pos or []}


def _field(name: str, *values: dict) -> dict:
    return {"name": name, "values": list(values)}


def _out_dim(e: dict) -> int:
    return e["code"][-1]["dest"]["dim"]


def _expr_stage(ops: list[dict], cm: list[dict]) -> int:
    st = 0
    for o in ops:
        for s in o["src"]:
            t = s["type"]
            if t == "cm":
                st = max(st, cm[s["id"]]["stage"])
            elif t in ("challenge", "airvalue", "airgroupvalue", "proofvalue"):
                st = max(st, s["stage"])
    return st


def _render(ops: list[dict], air: _Air) -> str:
    """Infix text of a (small) expression for its `line`."""
    names: dict[int, str] = {}

    def leaf(s: dict) -> str:
        t = s["type"]
        if t == "tmp":
            return names[s["id"]]
        if t in ("cm", "const"):
            nm = air.cm[s["id"]]["name"] if t == "cm" else f"{air.p.name}.C{s['id']}"
            if t == "cm" and "lengths" in air.cm[s["id"]]:
                nm += f"[{air.cm[s['id']]['lengths'][0]}]"
            pr = s["prime"]
            return ("'" + nm) if pr == -1 else (nm + "'" * pr if pr > 0 else nm)
        if t == "number":
            return s["value"]
        if t == "challenge":
            return CHALLENGES[s["id"]][0]
        return f"{t}{s['id']}"

    sym = {"add": "+", "sub": "-", "mul": "*"}
    for o in ops:
        txt = f"({leaf(o['src'][0])} {sym[o['op']]} {leaf(o['src'][1])})"
        names[o["dest"]["id"]] = txt if len(txt) <= 400 else f"tmp{o['dest']['id']}"
    return names[ops[-1]["dest"]["id"]]


class _AirBuilder:
    """One synthetic AIR, built in a fixed order of random draws (so a seed always gives the same
    bytes): the trace-domain expressions and their hints (one builder per hint kind), then Q from
    their constraint plans, then evMap / FRI and the starkinfo."""

    def __init__(self, p: AirParams):
        self.p = p
        self.rng = rng = random.Random(p.seed)
        self.air = air = _Air(p)
        self.expids = _Counter(rng.randint(0, 5))
        self.exprs: list[dict] = []                  # trace-domain expressionsCode entries
        self.codes: dict[int, list[dict]] = {}       # expId -> ops (for replay in Q)
        self.hints: list[dict] = []
        # expressions replayed into Q (im/gsum/gprod/imPol) read proofvalues only if
        # q_proofvalues (the Rust tool refuses them in Q); member-hint expressions always may
        self.pal_trace = air.palette(rng, pv=p.q_proofvalues)
        self.pal_pv = air.palette(rng, pv=True)

    # ------------------------------------------------------------------------- trace domain
    def trace_expr(self, out_dim: int, *, pal: Palette | None = None, n: int | None = None,
                   build: Callable[[Code], Val] | None = None, dest: dict | None = None,
                   must: Iterable[Val] = ()) -> dict:
        rng, air = self.rng, self.air
        c = Code(rng, first_tmp=rng.randint(0, 12), exp_ids=self.expids)
        if build is not None:
            build(c)
        else:
            lo, hi = self.p.trace_ops
            res = random_dag(c, n if n is not None else rng.randint(lo, hi), out_dim, pal or self.pal_trace)
            for leaf in must:                   # leaves this expression is meant to exercise
                res = c.op(rng.choice(("add", "sub", "mul")), res, leaf)
        if _out_dim({"code": c.ops}) != out_dim:
            raise SynthError("trace expression of the wrong dim")
        e = {"tmpUsed": c.tmp_used, "code": c.ops, "expId": self.expids.next(),
             "stage": _expr_stage(c.ops, air.cm)}
        if dest is not None:
            e["dest"] = dest
        e["line"] = "" if dest is not None else _render(c.ops, air)
        self.exprs.append(e)
        self.codes[e["expId"]] = c.ops
        return e

    def member_hints(self) -> None:
        """gsum_member_data hints over tmp selectors / references (dim-1 stage 0/1 expressions)."""
        p, rng, air = self.p, self.rng, self.air
        sel = self.trace_expr(1, pal=Palette(rng, air.openings, consts=list(air.consts)), n=rng.randint(1, 3))
        ref = self.trace_expr(1, pal=self.pal_pv, must=[_staged("proofvalue", i, s) for i, s in air.pv if s == 1])
        ref3 = self.trace_expr(3, pal=self.pal_pv, must=[_staged(t, i, s) for t, lst in (
            ("proofvalue", air.pv), ("airvalue", air.av), ("airgroupvalue", air.agv))
            for i, s in lst if s != 1])
        self.hints.append({"name": "gsum_member_data", "fields": [
            _field("name_piop", _h_str("Lookup")),
            _field("names", _h_str(f"{p.name}.expr", [0]), _h_str(air.cm[air.cm1[0]]["name"] + "'", [1]),
                   _h_str(f"{p.name}.expr3", [2])),
            _field("sumid", _h_num("1")), _field("proves", _h_num("0")),
            _field("selector", _h_tmp(sel)),
            _field("references", {**_h_tmp(ref), "pos": [0]},
                   {**air.hint_cm(air.cm1[0], air.next), "pos": [1]}, {**_h_tmp(ref3), "pos": [2]})]})

    def im_col_hints(self) -> list[tuple[int, tuple, int]]:
        """im_col hints: numerator (dim-1 / dim-3 tmp, number, cm) x denominator (dim-3 tmp);
        returns (im col, numerator (kind, payload), denominator expId) per column."""
        air, terms = self.air, []
        for k, kind in enumerate(self.p.im_cols):
            if kind in ("d1", "d3"):
                num = self.trace_expr(1 if kind == "d1" else 3)
                hnum, nval = _h_tmp(num), ("tmp", num["expId"])
            elif kind == "number":
                hnum, nval = _h_num(P_MINUS_1), ("number", P_MINUS_1)
            elif kind == "cm":
                pid = self.rng.choice(air.cm1)
                hnum, nval = air.hint_cm(pid), ("cm", pid)
            else:
                raise SynthError(f"unknown im_col numerator kind {kind!r}")
            den = self.trace_expr(3)
            self.hints.append({"name": "im_col", "fields": [
                _field("reference", air.hint_cm(air.im[k])), _field("numerator", hnum),
                _field("denominator", _h_tmp(den))]})
            terms.append((air.im[k], nval, den["expId"]))
        return terms

    def impol_columns(self) -> list[tuple[int, int]]:
        """imPol columns: the expression has a cm dest (computed into stage 2 by the prover)."""
        terms = []
        for pid in self.air.impol:
            c = self.air.cm[pid]
            e = self.trace_expr(3, dest={"op": "cm", "stage": 2, "stageId": c["stageId"], "id": pid})
            c["expId"] = e["expId"]
            terms.append((pid, e["expId"]))
        return terms

    def gsum_hint(self) -> dict | None:
        """gsum_col: expression = sum of the im columns (+ a direct term); result airgroupvalue 0."""
        if not self.p.gsum:
            return None
        air, rng = self.air, self.rng

        def build(c: Code) -> Val:
            acc = None
            for pid in air.im + air.impol:
                v = air.cm_val(pid)
                acc = v if acc is None else c.op("add", acc, v)
            extra = random_dag(c, rng.randint(2, 6), 3, self.pal_trace)
            return c.op(rng.choice(("add", "sub")), acc, extra) if acc is not None else extra
        exp = self.trace_expr(3, build=build)
        self.hints.append({"name": "gsum_col", "fields": [
            _field("reference", air.hint_cm(air.gsum_col)), _field("expression", _h_tmp(exp)),
            _field("result", {"op": "airgroupvalue", "id": 0, "dim": 3, "stage": 2, "pos": []})]})
        return exp

    def gprod_hint(self) -> dict | None:
        """gprod_col: numerator tmp (dim 3), denominator number 1; result airgroupvalue 1 (or 0)."""
        if not self.p.gprod:
            return None
        exp = self.trace_expr(3)
        agv = 1 if self.p.gsum else 0
        self.hints.append({"name": "gprod_col", "fields": [
            _field("reference", self.air.hint_cm(self.air.gprod_col)), _field("numerator", _h_tmp(exp)),
            _field("denominator", _h_num("1")),
            _field("result", {"op": "airgroupvalue", "id": agv, "dim": 3, "stage": 2, "pos": []})]})
        return exp

    # ------------------------------------------------------------------------------------ Q
    def _im_plan(self, q: Code, pid: int, nval: tuple, den_id: int) -> Callable[[], Val]:
        air, codes = self.air, self.codes

        def f() -> Val:
            d = q.replay(codes[den_id])
            t = q.op("mul", air.cm_val(pid), d)
            if nval[0] == "tmp":
                n = q.replay(codes[nval[1]])
            elif nval[0] == "number":
                n = number(nval[1])
            else:
                n = air.cm_val(nval[1])
            return q.op("sub", t, n, order=False)
        return f

    def _running_plans(self, q: Code, col: int, eid: int, agv: int) -> list[tuple[str, Callable[[], Val], int]]:
        """The running-sum / product constraint of a gsum / gprod column and its result."""
        air, codes, L1 = self.air, self.codes, 0
        prod = col == air.gprod_col

        def running() -> Val:
            one_minus = q.op("sub", number("1"), const(L1), order=False)
            prev = q.op("mul", air.cm_val(col, air.prev), one_minus)
            body = q.replay(codes[eid])
            rhs = q.op("mul", q.op("add", prev, const(L1)), body) if prod else q.op("add", prev, body)
            return q.op("sub", air.cm_val(col), rhs, order=False)

        def result() -> Val:
            d = q.op("sub", air.cm_val(col), _staged("airgroupvalue", agv, 2), order=False)
            return q.op("mul", const(L1, air.next), d)
        return [("everyRow", running, 0), ("everyRow", result, 0)]

    def std_plans(self, q: Code, im_terms, impol_terms, gsum_exp, gprod_exp) -> list:
        """The constraints the hints imply: (boundary, build, imPol) each."""
        air, p = self.air, self.p
        plans: list[tuple[str, Callable[[], Val], int]] = []
        for pid, nval, den_id in im_terms:
            plans.append(("everyRow", self._im_plan(q, pid, nval, den_id), 0))
        for pid, eid in impol_terms:
            plans.append(("everyRow", lambda pid=pid, eid=eid: q.op(
                "sub", air.cm_val(pid), q.replay(self.codes[eid]), order=False), 1))
        for col, eid, agv in ((air.gsum_col, gsum_exp and gsum_exp["expId"], 0),
                              (air.gprod_col, gprod_exp and gprod_exp["expId"], 1 if p.gsum else 0)):
            if col is not None:
                plans += self._running_plans(q, col, eid, agv)
        return plans

    def random_plans(self, q: Code, n_std: int, est_fixed: int, pal_q: Palette, far: list[Val]):
        """User-like constraints first, sized at build time so Q lands near q_ops."""
        p, rng = self.p, self.rng
        clo, chi = p.constraint_ops
        k = 0
        while True:
            left = p.q_ops - len(q.ops) - est_fixed
            if left <= 0 and k + n_std >= 2:
                return
            n = max(1, min(rng.randint(clo, chi), left - 4))
            bnd = "everyRow"
            if p.extra_boundaries and (k == 0 or rng.random() < 0.2):
                bnd = rng.choice(p.extra_boundaries)
            dim = 3 if rng.random() < 0.45 else 1
            pal = pal_q if dim == 3 else replace(pal_q, challenges=[])
            yield bnd, (lambda n=n, dim=dim, pal=pal: random_dag(q, n, dim, pal, far=far, p_far=p.p_far)), 0
            k += 1

    def q_expression(self, im_terms, impol_terms, gsum_exp, gprod_exp) -> tuple[dict, list[dict], list[str]]:
        """Q: every constraint (random ones, then the hints'), Horner-summed with the vc
        challenge, boundary constraints times their Zi, the sum times Zi(everyRow) into q.
        Returns (Q's expressionsCode entry, constraints, boundaries)."""
        p, rng, air = self.p, self.rng, self.air
        q = Code(rng, first_tmp=p.q_first_tmp + 2, exp_ids=self.expids)
        pal_q = air.palette(rng, cm3=air.im + air.impol + [c for c in (air.gsum_col, air.gprod_col)
                                                             if c is not None], pv=p.q_proofvalues)
        far: list[Val] = []
        constraints: list[dict] = []
        plans = self.std_plans(q, im_terms, impol_terms, gsum_exp, gprod_exp)
        # std constraints cost about their replayed expressions + 4 ops (+2 Horner) each
        est_fixed = sum(len(c) for c in self.codes.values()) + 6 * len(plans) + 1
        boundaries = ["everyRow"] + [b for b in dict.fromkeys(p.extra_boundaries)]
        acc = None
        for k, (bnd, build, impol) in enumerate(itertools.chain(
                self.random_plans(q, len(plans), est_fixed, pal_q, far), plans)):
            start = len(q.ops)
            c = build()
            dbg = q.closure(c)
            constraints.append({"tmpUsed": max(o["dest"]["id"] for o in dbg) + 1, "code": dbg,
                                "boundary": bnd,
                                "line": f"INFO {k}: synth constraint {k} ({len(dbg)} ops) == 0",
                                "imPol": impol, "stage": min(N_STAGES, max(1, _expr_stage(dbg, air.cm)))})
            if bnd != "everyRow":
                c = q.op("mul", c, zi(boundaries.index(bnd)))
            acc = c if acc is None else q.op("add", q.op("mul", challenge(VC), acc), c)
            if p.p_far > 0:
                cands = [q.ops[i]["dest"] for i in range(start, len(q.ops))
                         if q.cone[q.ops[i]["dest"]["id"]] <= 2]
                for d in rng.sample(cands, min(4, len(cands))):
                    far.append(q._ref(d["id"], d["dim"], False))
        # the setup writes cExp's tmp bare (no prime / expId) and with a lower id than the rest
        if q.ops[-1]["dest"]["id"] != acc.tmp_id:
            raise SynthError("Q: the Horner sum must be the last op")
        q.ops[-1]["dest"] = {"type": "tmp", "id": p.q_first_tmp, "dim": acc.dim}
        del q.def_op[acc.tmp_id]
        q.def_op[p.q_first_tmp] = len(q.ops) - 1
        acc = Val({"type": "tmp", "id": p.q_first_tmp, "dim": acc.dim}, acc.dim)
        q.op_q(acc, zi(0), acc.dim)
        q_expr = {"tmpUsed": q.tmp_used, "code": q.ops, "expId": self.expids.next(), "stage": Q_STAGE,
                  "line": ""}
        return q_expr, constraints, boundaries

    # ------------------------------------------------------------------------- evMap, FRI
    def ev_map(self, q_expr: dict) -> list[dict]:
        air = self.air
        used: dict[int, set[tuple[str, int]]] = {o: set() for o in air.openings}
        for e in self.exprs + [q_expr]:
            for o in e["code"]:
                for s in o["src"]:
                    if s["type"] in ("cm", "const"):
                        used[s["prime"]].add((s["type"], s["id"]))
        for i in air.consts:
            used[0].add(("const", i))
        for pid in range(len(air.cm)):
            used[0].add(("cm", pid))
        out = []
        for pos, op in enumerate(air.openings):
            for t in ("const", "cm"):
                for _, i in sorted(x for x in used[op] if x[0] == t):
                    out.append({"type": t, "id": i, "prime": op, "openingPos": pos})
        return out

    def starkinfo(self, q_expr: dict, constraints: list[dict], boundaries: list[str], ev_map: list[dict]) -> dict:
        p, air = self.p, self.air
        c_exp_id = q_expr["expId"]
        return {
            "name": p.name,
            "cmPolsMap": air.cm,
            "constPolsMap": [{"stage": 0, "name": f"{p.name}.__L1" if i == 0 else f"{p.name}.C{i}", "dim": 1,
                              "polsMapId": i, "stageId": i} for i in air.consts],
            "challengesMap": [{"name": n, "stage": s, "dim": 3, "stageId": sid} for n, s, sid in CHALLENGES],
            "publicsMap": [{"name": f"pub{i}", "stage": 1} for i in range(p.n_publics)],
            "proofValuesMap": [{"name": f"pv{i}", "stage": s} for i, s in air.pv],
            "airgroupValuesMap": [{"name": f"{p.name}.agv{i}", "stage": s} for i, s in air.agv],
            "airValuesMap": [{"name": f"{p.name}.av{i}", "stage": s} for i, s in air.av],
            "mapSectionsN": air.sections,
            "airId": p.air_id,
            "airgroupId": p.airgroup_id,
            "nConstants": p.n_const,
            "nPublics": p.n_publics,
            "airGroupValues": [{"aggType": 0, "stage": s} for _, s in air.agv],
            "nStages": N_STAGES,
            "customCommits": [],
            "customCommitsMap": [],
            "starkStruct": {"nBits": p.n_bits, "merkleTreeArity": 4, "transcriptArity": 4,
                            "merkleTreeCustom": True, "lastLevelVerification": 2, "powBits": 16,
                            "hashCommits": True, "nBitsExt": p.n_bits + p.blowup_bits,
                            "verificationHashType": "GL",
                            "steps": [{"nBits": p.n_bits + p.blowup_bits}], "nQueries": 228},
            "boundaries": [{"name": b} for b in boundaries],
            "openingPoints": list(air.openings),
            "cExpId": c_exp_id,
            "qDim": q_expr["code"][-1]["dest"]["dim"],
            "qDeg": p.q_deg,
            "nConstraints": len(constraints),
            "nCommitmentsStage1": 0,
            "evMap": ev_map,
            "friExpId": c_exp_id + 1,
            "security": dict(SECURITY),
        }


def make_air(p: AirParams) -> tuple[dict, dict]:
    """(starkinfo, expressionsinfo) of one synthetic AIR, consistent with each other: the hint
    builders (member data, im_col, imPol, gsum, gprod) then the Q assembler (_AirBuilder)."""
    b = _AirBuilder(p)
    if p.member_hints:
        b.member_hints()
    im_terms = b.im_col_hints()
    impol_terms = b.impol_columns()
    gsum_exp, gprod_exp = b.gsum_hint(), b.gprod_hint()
    if (p.gsum or p.gprod) and len(b.air.agv) < int(p.gsum) + int(p.gprod):
        raise SynthError("gsum/gprod need one stage-2 airgroupvalue each")
    q_expr, constraints, boundaries = b.q_expression(im_terms, impol_terms, gsum_exp, gprod_exp)
    ev_map = b.ev_map(q_expr)
    fri = _fri(b.rng, b.air, ev_map)
    fri_expr = {"tmpUsed": fri.tmp_used, "code": fri.ops, "expId": q_expr["expId"] + 1, "stage": 0, "line": ""}
    si = b.starkinfo(q_expr, constraints, boundaries, ev_map)
    ei = {"hintsInfo": b.hints,
          "expressionsCode": sorted(b.exprs, key=lambda e: e["expId"]) + [q_expr, fri_expr],
          "constraints": constraints}
    validate(si, ei)
    return si, ei


def _fri(rng: random.Random, air: _Air, ev_map: list[dict]) -> Code:
    """FRI polynomial: per opening, Horner with std_vf2 over (col - eval), times xDivXSubXi;
    openings combined with std_vf1 (the setup's shape; no prime/expId on tmps)."""
    f = Code(rng, prime=False)
    groups = []
    for pos, op in enumerate(air.openings):
        acc = None
        for i, ev in enumerate(ev_map):
            if ev["openingPos"] != pos:
                continue
            col = air.cm_val(ev["id"]) if ev["type"] == "cm" else const(ev["id"])
            if acc is not None:
                acc = f.op("mul", acc, challenge(VF2), order=False)
            t = f.op("sub", col, eval_(i), order=False)
            acc = t if acc is None else f.op("add", acc, t, order=False)
        if acc is not None:
            groups.append(f.op("mul", acc, xdiv(pos, op), order=False))
    res = f.op("mul", challenge(VF1), groups[0], order=False) if len(groups) > 1 else groups[0]
    for k, g in enumerate(groups[1:], 1):
        last = k == len(groups) - 1
        res = f.op("add", res, g, order=False, tmp_id=f.next_tmp + 1 if last else None)
        if not last:
            res = f.op("mul", challenge(VF1), res, order=False)
    return f


# ------------------------------------------------------------------------------------ checks
def _check_code(code: list[dict], where: str, q_last: bool = False) -> None:
    defined: dict[int, int] = {}
    for k, o in enumerate(code):
        if o["op"] not in ("add", "sub", "mul") or len(o["src"]) != 2:
            raise SynthError(f"{where}[{k}]: bad op")
        for s in o["src"]:
            if s["type"] == "tmp":
                if s["id"] not in defined:
                    raise SynthError(f"{where}[{k}]: tmp {s['id']} used before it is defined")
                if defined[s["id"]] != s["dim"]:
                    raise SynthError(f"{where}[{k}]: tmp {s['id']} dim mismatch")
        d = o["dest"]
        want = max(s.get("dim", 1) for s in o["src"])
        if d["type"] == "q":
            if not (q_last and k == len(code) - 1):
                raise SynthError(f"{where}[{k}]: q dest before the last op")
            continue
        if d["type"] != "tmp":
            raise SynthError(f"{where}[{k}]: dest type {d['type']}")
        if d["dim"] != want:
            raise SynthError(f"{where}[{k}]: dest dim {d['dim']} != {want}")
        if d["id"] in defined:
            raise SynthError(f"{where}[{k}]: tmp {d['id']} written twice (not SSA)")
        defined[d["id"]] = d["dim"]


def _check_layout(si: dict) -> None:
    """cmPolsMap positions, section sizes, constants, openings, boundaries."""
    cm = si["cmPolsMap"]
    pos: dict[int, int] = {}
    for i, c in enumerate(cm):
        if c["polsMapId"] != i:
            raise SynthError(f"cmPolsMap[{i}].polsMapId")
        if c["stagePos"] != pos.get(c["stage"], 0):
            raise SynthError(f"cmPolsMap[{i}].stagePos not contiguous")
        pos[c["stage"]] = c["stagePos"] + c["dim"]
    for s in (1, 2, 3):
        if si["mapSectionsN"].get(f"cm{s}", 0) != pos.get(s, 0):
            raise SynthError(f"mapSectionsN.cm{s}")
    if si["mapSectionsN"]["const"] != si["nConstants"] or len(si["constPolsMap"]) != si["nConstants"]:
        raise SynthError("nConstants")
    if si["openingPoints"] != sorted(si["openingPoints"]):
        raise SynthError("openingPoints not sorted")
    if si["boundaries"][0] != {"name": "everyRow"}:
        raise SynthError("boundaries[0] must be everyRow")


def _check_operand(si: dict, e: dict, s: dict, is_q: bool) -> None:
    """One source operand of expression `e`: id in range, opening, dims, where it may appear."""
    cm, t, where = si["cmPolsMap"], s["type"], f"expression {e['expId']}"
    lim = {"cm": len(cm), "const": si["nConstants"], "public": si["nPublics"],
           "challenge": len(si["challengesMap"]), "eval": len(si["evMap"]),
           "airvalue": len(si["airValuesMap"]), "airgroupvalue": len(si["airgroupValuesMap"]),
           "proofvalue": len(si["proofValuesMap"]), "xDivXSubXi": len(si["openingPoints"])}
    stages = {"airvalue": si["airValuesMap"], "airgroupvalue": si["airgroupValuesMap"],
              "proofvalue": si["proofValuesMap"]}
    fri_only = e["expId"] != si["friExpId"]
    checks = [   # lazily, in order: an earlier check guards the indexing of a later one
        (lambda: t in lim and not 0 <= s["id"] < lim[t], lambda: f"{t} id {s['id']} out of range"),
        (lambda: t in ("cm", "const") and s["prime"] not in si["openingPoints"], lambda: f"opening {s['prime']}"),
        (lambda: t == "cm" and cm[s["id"]]["dim"] != s["dim"], lambda: f"cm {s['id']} dim"),
        (lambda: t == "cm" and cm[s["id"]]["stage"] == Q_STAGE and fri_only, lambda: "reads a Q column"),
        (lambda: t in stages and s["dim"] != (1 if stages[t][s["id"]]["stage"] == 1 else 3), lambda: f"{t} dim"),
        (lambda: t == "Zi" and not 0 <= s["boundaryId"] < len(si["boundaries"]), lambda: "Zi boundaryId"),
        (lambda: t == "number" and not 0 <= int(s["value"]) < 1 << 64, lambda: "number"),
        (lambda: t == "Zi" and not is_q, lambda: "Zi outside Q"),
        (lambda: t in ("eval", "xDivXSubXi") and fri_only, lambda: f"{t} outside FRI"),
    ]
    for bad, what in checks:
        if bad():
            raise SynthError(f"{where}: {what()}")


def _check_expressions(si: dict, ei: dict) -> dict[int, dict]:
    """Every expression: unique id, SSA code, tmpUsed, operands; returns them by id."""
    by_id = {}
    for e in ei["expressionsCode"]:
        if e["expId"] in by_id:
            raise SynthError(f"duplicate expId {e['expId']}")
        by_id[e["expId"]] = e
        if not e["code"]:
            raise SynthError(f"expression {e['expId']} is empty")
        is_q = e["expId"] == si["cExpId"]
        _check_code(e["code"], f"expressionsCode[expId {e['expId']}].code", q_last=is_q)
        ids = [o["dest"]["id"] for o in e["code"] if o["dest"]["type"] == "tmp"]
        if e["tmpUsed"] != max(ids, default=-1) + 1:
            raise SynthError(f"expression {e['expId']}: tmpUsed")
        for o in e["code"]:
            for s in o["src"]:
                _check_operand(si, e, s, is_q)
    return by_id


def _check_q(si: dict, by_id: dict[int, dict]) -> None:
    qe = by_id.get(si["cExpId"])
    if qe is None or si["friExpId"] not in by_id:
        raise SynthError("cExpId / friExpId missing")
    last = qe["code"][-1]
    if last["dest"] != {"type": "q", "id": 0, "dim": si["qDim"]} or last["op"] != "mul" \
            or last["src"][1] != {"type": "Zi", "boundaryId": 0, "dim": 1}:
        raise SynthError("Q must end with mul(cExp, Zi[0]) into q")
    if qe["stage"] != si["nStages"] + 1:
        raise SynthError("Q stage")


def _check_hints(si: dict, ei: dict, by_id: dict[int, dict]) -> None:
    cm = si["cmPolsMap"]
    for h in ei["hintsInfo"]:
        for f in h["fields"]:
            for v in f["values"]:
                if v["op"] == "tmp" and (v["id"] not in by_id or _out_dim(by_id[v["id"]]) != v["dim"]):
                    raise SynthError(f"hint {h['name']}.{f['name']}: tmp {v['id']}")
                if v["op"] == "cm" and cm[v["id"]]["dim"] != v["dim"]:
                    raise SynthError(f"hint {h['name']}.{f['name']}: cm {v['id']}")
    for c in cm:
        if c.get("imPol"):
            e = by_id.get(c["expId"])
            if e is None or e.get("dest", {}).get("id") != c["polsMapId"]:
                raise SynthError(f"imPol column {c['polsMapId']}: expression")


def validate(si: dict, ei: dict) -> None:
    """Structural consistency of a (synthetic) key: layout, ids, SSA, dims, Q shape, hints."""
    _check_layout(si)
    by_id = _check_expressions(si, ei)
    _check_q(si, by_id)
    for k, c in enumerate(ei["constraints"]):
        _check_code(c["code"], f"constraints[{k}].code")
    _check_hints(si, ei, by_id)


# ------------------------------------------------------------------------------- statistics
def q_expression(si: dict, ei: dict) -> dict:
    return next(e for e in ei["expressionsCode"] if e["expId"] == si["cExpId"])


def swap_stats(ei: dict) -> dict[str, int]:
    """Equal-dim adds by the `.bin` writer's order (spec §1.3): swapped / kept with distinct ranks,
    plus mixed-dim ops in each JSON order (dim-1 first / dim-3 first)."""
    out = {"add_swapped": 0, "add_kept_distinct": 0, "mixed_1x3": 0, "mixed_3x1": 0}
    for e in ei["expressionsCode"]:
        for o in e["code"]:
            a, b = o["src"]
            da, db = a.get("dim", 1), b.get("dim", 1)
            if da != db:
                out["mixed_1x3" if da < db else "mixed_3x1"] += 1
            elif o["op"] == "add" and rank(a) != rank(b):
                out["add_swapped" if rank(a) > rank(b) else "add_kept_distinct"] += 1
    return out


# --------------------------------------------------------------------------------- writing
def dumps(obj) -> str:
    """Compact, deterministic JSON (insertion key order = the setup's order), one trailing newline."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True, allow_nan=False) + "\n"


def write_key(root: Path, airs: list[tuple[str, str, dict, dict]]) -> list[Path]:
    """Write `<root>/<rel_dir>/<base>.starkinfo.json` and `.expressionsinfo.json` per AIR."""
    root = Path(root)
    out = []
    for rel_dir, base, si, ei in airs:
        d = root / rel_dir
        d.mkdir(parents=True, exist_ok=True)
        for suffix, obj in ((".starkinfo.json", si), (".expressionsinfo.json", ei)):
            path = d / f"{base}{suffix}"
            text = dumps(obj)
            if not path.is_file() or path.read_text() != text:
                path.write_text(text)
            out.append(path)
    return out


def sym_of(rel_dir: str, si: dict) -> str:
    """Kernel sym `<phase>_a<airgroupId>_<airId>_b<nBits>_e<cExpId>` (spec §6)."""
    return (f"{phase_of(Path(rel_dir))}_a{si['airgroupId']}_{si['airId']}"
            f"_b{si['starkStruct']['nBits']}_e{si['cExpId']}")


# ------------------------------------------------------------------------------------ sample
def _air_dir(group: str, air: str, leaf: str = "air") -> str:
    return f"{SAMPLE_NAME}/{group}/airs/{air}/{leaf}"


def sample_airs(seed: int = SAMPLE_SEED) -> list[tuple[str, str, dict, dict]]:
    """The AIRs of provingkey-sample/ as (rel_dir, base, starkinfo, expressionsinfo)."""
    tiny = make_air(AirParams(
        "Tiny", seed + 1, airgroup_id=0, air_id=0, n_bits=4, q_ops=40, q_deg=1, n_cm1=3,
        n_const=1, opening_points=(0, 1), im_cols=("d1",), n_publics=1, trace_ops=(2, 4),
        constraint_ops=(3, 8), q_first_tmp=3))
    medium = make_air(AirParams(
        "Medium", seed + 2, airgroup_id=0, air_id=1, n_bits=6, q_ops=520, q_deg=2, n_cm1=8,
        n_const=3, im_cols=("d1", "d3", "number", "d1", "cm"), n_impol=1, gsum=True, gprod=True,
        member_hints=True, n_publics=3, airvalue_stages=(1, 2, 1), airgroupvalue_stages=(2, 2),
        proofvalue_stages=(1, 2), trace_ops=(4, 16), constraint_ops=(6, 40), q_first_tmp=40))
    large = make_air(AirParams(
        "Large", seed + 3, airgroup_id=0, air_id=2, n_bits=5, q_ops=5400, q_deg=2, n_cm1=24,
        n_const=4, im_cols=("d3", "d1"), gsum=True, n_publics=2, airvalue_stages=(1, 2),
        airgroupvalue_stages=(2,), trace_ops=(6, 20), constraint_ops=(30, 140), p_far=0.06,
        q_first_tmp=100))
    skipped = make_air(AirParams(
        "Skipped", seed + 4, airgroup_id=0, air_id=3, n_bits=4, q_ops=80, q_deg=1, n_cm1=4,
        n_const=2, extra_boundaries=("firstRow",), n_publics=1, constraint_ops=(4, 16)))
    shared = make_air(AirParams(
        "Shared", seed + 5, airgroup_id=1, air_id=0, n_bits=5, q_ops=160, q_deg=2, n_cm1=6,
        n_const=2, im_cols=("d3", "d1"), gsum=True, airgroupvalue_stages=(2,), n_publics=2,
        constraint_ops=(5, 25)))
    return [
        (_air_dir("Basic", "Tiny"), "Tiny", *tiny),
        (_air_dir("Basic", "Medium"), "Medium", *medium),
        (_air_dir("Basic", "Large"), "Large", *large),
        (_air_dir("Basic", "Skipped"), "Skipped", *skipped),
        (_air_dir("Rec", "Shared", "recursive1"), "Shared", *shared),
        (_air_dir("Rec", "Shared", "recursive2"), "Shared", *shared),
    ]


def summary(airs: list[tuple[str, str, dict, dict]]) -> list[dict]:
    rows = []
    for rel, base, si, ei in airs:
        rows.append({"dir": rel, "base": base, "nBits": si["starkStruct"]["nBits"],
                     "expressions": len(ei["expressionsCode"]),
                     "q_ops": len(q_expression(si, ei)["code"]), "sym": sym_of(rel, si)})
    return rows


_README = """# provingkey-sample (generated: do not edit)

Synthetic provingKey written by `python -m codegen.sample.synth provingkey-sample` (seed {seed});
`tests/test_synth.py` checks that this directory equals a fresh build. Layout: this directory
plays the role of a setup's `provingKey/` (`<name>/<Group>/airs/<Air>/<phase dir>/`).

| AIR dir | nBits | expressions | Q ops | sym | note |
| --- | --- | --- | --- | --- | --- |
{rows}
"""

_NOTES = {
    "Tiny": "tiny Q, openings [0, 1], one im_col (dim-1 numerator)",
    "Medium": "im_col (dim-1 / dim-3 / number / cm numerators), imPol, gsum, gprod, member hints, "
              "airvalues, proofvalues, publics",
    "Large": "chunked Q, temps live across long spans",
    "Skipped": "boundaries [everyRow, firstRow], Q uses Zi boundaryId 1: must be skipped",
    "Shared": "recursive1 + recursive2 share one kernel sym",
}


def build_sample(root: Path, seed: int = SAMPLE_SEED) -> list[dict]:
    """(Re)create the sample key under `root` (byte-identical on every run); returns `summary`."""
    root = Path(root)
    shutil.rmtree(root / SAMPLE_NAME, ignore_errors=True)
    airs = sample_airs(seed)
    write_key(root, airs)
    rows = summary(airs)
    table = "\n".join(f"| `{r['dir']}` | {r['nBits']} | {r['expressions']} | {r['q_ops']} | "
                      f"`{r['sym']}` | {_NOTES[r['base']]} |" for r in rows)
    (root / "README.md").write_text(_README.format(seed=seed, rows=table))
    return rows


def build_large(root: Path, n_ops: int, n_bits: int = 5, seed: int = SAMPLE_SEED) -> list[dict]:
    """One AIR `Bench` with a Q of about `n_ops` ops (benchmarks / scale tests)."""
    si, ei = make_air(AirParams(
        "Bench", seed + 100 + n_ops, airgroup_id=0, air_id=0, n_bits=n_bits, q_ops=n_ops, q_deg=2,
        n_cm1=32, n_const=4, im_cols=("d3", "d1"), gsum=True, n_publics=2, airvalue_stages=(1, 2),
        airgroupvalue_stages=(2,), trace_ops=(6, 20), constraint_ops=(30, 160), p_far=0.06,
        q_first_tmp=100))
    airs = [(_air_dir("Bench", "Bench"), "Bench", si, ei)]
    write_key(Path(root), airs)
    return summary(airs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m codegen.sample.synth", description=__doc__.split("\n")[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--large-ops", type=int, default=0, metavar="N",
                    help="write one AIR with a Q of about N ops instead of the sample")
    ap.add_argument("--n-bits", type=int, default=5, help="nBits of the --large-ops AIR")
    ap.add_argument("--seed", type=int, default=SAMPLE_SEED)
    a = ap.parse_args(argv)
    if a.large_ops:
        rows = build_large(a.outdir, a.large_ops, a.n_bits, a.seed)
    else:
        rows = build_sample(a.outdir, a.seed)
    for r in rows:
        print(f"{r['dir']}: nBits {r['nBits']}, {r['expressions']} expressions, "
              f"Q {r['q_ops']} ops, sym {r['sym']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
