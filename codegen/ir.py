"""Operand resolution, SSA checks and the `.bin` writer's operand order (spec §1.3, §1.4, §2.4, §6).

A `KernelIR` is a straight-line list of `Op`s over SSA values: value ``i`` is defined by ``ops[i]``.
Operands are either `Val` (an earlier value) or `Leaf` (a resolved load: column, scalar buffer or
literal). Every op carries the interpreter's operand order, so the emitter needs no semantics.
Expressions the GPU cannot evaluate, or that break the rules, become `Skip(reason)`.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Union

from codegen import operands
from codegen.model import Expression, Operand, StarkInfo

UNSUPPORTED = {"custom": "custom commit", "xDivXSubXi": "xDivXSubXi (FRI)", "x": "x"}
#: cm stages the kernel ABI can address: exps_launch / exps_launch_expr pass off_cm1..off_cm3 (spec §5)
CM_STAGES = (1, 2, 3)


def rank(o: Operand) -> int:
    """Rank of an operand in the `.bin` writer's ordering (operands.py, spec §1.3)."""
    return operands.rank_of(o.type, o.dim)


def swapped(a: Operand, b: Operand) -> bool:
    """Whether the `.bin` writer swaps JSON (src0, src1) = (a, b) (spec §1.3)."""
    return operands.swapped(a.type, a.dim, b.type, b.dim)


def bin_order(op: str, a: Operand, b: Operand, args: tuple | None = None) -> tuple:
    """JSON (src0, src1) = (a, b) -> interpreter (arith, A, B) per the writer's swap rule; with
    `args`, the resolved arguments of a and b are what gets ordered."""
    return operands.ordered(op, *(args or (a, b)), swapped(a, b))


@dataclass(frozen=True)
class Leaf:
    """A resolved load. kind: cm | const | zi | number | public | challenge | eval | airvalue |
    airgroupvalue | proofvalue. `col`: element column (cm: stagePos, const: id, zi: boundary) or
    buffer index (scalars: the first component's index). `shift`: row offset in domain rows."""

    kind: str
    dim: int
    stage: int = 0
    col: int = 0
    shift: int = 0
    value: int = 0


@dataclass(frozen=True)
class Val:
    id: int
    dim: int


Arg = Union[Leaf, Val]


@dataclass(frozen=True)
class Op:
    arith: str      # add | sub | mul | sub_swap | copy
    shape: str      # 11 | 31 | 33 | 1 | 3 (copy)
    a: Arg
    b: Arg | None
    dim: int        # result dim

    def args(self) -> tuple[Arg, ...]:
        return (self.a,) if self.b is None else (self.a, self.b)


@dataclass(frozen=True)
class KernelIR:
    exp_id: int
    extended: bool
    ops: tuple[Op, ...]

    @property
    def out_dim(self) -> int:
        return self.ops[-1].dim

    def digest(self) -> str:
        """Hash of the normalized IR (the kernel's content identity)."""
        h = hashlib.sha256()
        h.update(json.dumps([self.exp_id, self.extended], separators=(",", ":")).encode())
        for op in self.ops:
            h.update(json.dumps(_op_json(op), separators=(",", ":")).encode())
        return h.hexdigest()


def _op_json(op: Op) -> list:
    def arg(x):
        return ["v", x.id, x.dim] if isinstance(x, Val) else ["l", *asdict(x).values()]
    return [op.arith, op.shape, op.dim] + [arg(x) for x in op.args()]


@dataclass(frozen=True)
class Skip:
    exp_id: int
    reason: str


class _Refuse(Exception):
    pass


def _prefix_positions(stages: tuple[int, ...]) -> list[int]:
    return operands.value_positions(stages)


class Resolver:
    """Operand -> Leaf for one AIR."""

    def __init__(self, si: StarkInfo):
        self.si = si
        self.av = _prefix_positions(si.airvalue_stages)
        self.agv = _prefix_positions(si.airgroupvalue_stages)
        self.pv = _prefix_positions(si.proofvalue_stages)

    def leaf(self, o: Operand, extended: bool, where: str) -> Leaf:
        si = self.si
        mult = si.blowup if extended else 1
        t = o.type
        if t in UNSUPPORTED:
            raise _Refuse(f"{where}: operand {UNSUPPORTED[t]} is not evaluated by the GPU prover")
        if t == "cm":
            p = si.cm_pols[o.id]
            if p.stage not in CM_STAGES:
                raise _Refuse(f"{where}: cm {o.id} is in stage {p.stage}; the kernel ABI passes only the "
                              "stage 1-3 offsets (spec §5)")
            return Leaf("cm", o.dim, stage=p.stage, col=p.stage_pos, shift=o.prime * mult)
        if t == "const":
            return Leaf("const", 1, col=o.id, shift=o.prime * mult)
        if t == "Zi":
            if not extended:
                raise _Refuse(f"{where}: Zi outside the Q expression")
            if o.boundary_id != 0 or si.boundaries[:1] != ("everyRow",):
                raise _Refuse(f"{where}: Zi boundary {o.boundary_id} "
                              "(the GPU prover computes only the everyRow zerofier)")
            return Leaf("zi", 1, col=0)
        if t == "number":
            return Leaf("number", 1, value=o.value)
        if t == "public":
            return Leaf("public", 1, col=o.id)
        if t == "challenge":
            return Leaf("challenge", 3, col=3 * o.id)
        if t == "eval":
            return Leaf("eval", 3, col=3 * o.id)
        if t == "airvalue":
            return Leaf("airvalue", o.dim, col=self.av[o.id])
        if t == "airgroupvalue":
            return Leaf("airgroupvalue", o.dim, col=self.agv[o.id])
        if t == "proofvalue":
            return Leaf("proofvalue", o.dim, col=self.pv[o.id])
        raise _Refuse(f"{where}: operand type {t} cannot be a source")


def _shape(a: Arg, b: Arg) -> str:
    return {(1, 1): "11", (3, 1): "31", (3, 3): "33"}[(a.dim, b.dim)]


def lower(si: StarkInfo, expr: Expression, extended: bool, resolver: Resolver | None = None) -> KernelIR | Skip:
    """Lower one JSON expression to IR, or explain why it cannot be generated."""
    r = resolver or Resolver(si)
    try:
        return _lower(r, expr, extended)
    except _Refuse as e:
        return Skip(expr.exp_id, str(e))


def _lower(r: Resolver, expr: Expression, extended: bool) -> KernelIR:
    if not expr.code:
        raise _Refuse(f"expression {expr.exp_id} is empty")
    env: dict[int, Val] = {}
    ops: list[Op] = []
    last = len(expr.code) - 1
    for k, step in enumerate(expr.code):
        where = f"expressionsCode[{expr.index}].code[{k}]"
        args: list[Arg] = []
        for j, s in enumerate(step.src):
            if s.type == "tmp":
                v = env.get(s.id)
                if v is None:
                    raise _Refuse(f"{where}.src[{j}]: tmp {s.id} is read before it is written (not SSA)")
                if v.dim != s.dim:
                    raise _Refuse(f"{where}.src[{j}]: tmp {s.id} has dim {v.dim}, read as dim {s.dim}")
                args.append(v)
            else:
                args.append(r.leaf(s, extended, f"{where}.src[{j}]"))
        if step.op == "copy":
            op = Op("copy", str(args[0].dim), args[0], None, args[0].dim)
        else:
            arith, a, b = bin_order(step.op, step.src[0], step.src[1], (args[0], args[1]))
            op = Op(arith, _shape(a, b), a, b, max(a.dim, b.dim))
        d = step.dest
        if d.type == "tmp":
            if d.id in env:
                raise _Refuse(f"{where}.dest: tmp {d.id} is written twice (not SSA)")
            env[d.id] = Val(len(ops), op.dim)
        elif k != last or (d.type != "q" or not extended):
            raise _Refuse(f"{where}.dest: a {d.type} destination before the last op")
        # q's too: the .bin writer looks each op up by (dest dim, source dims) and refuses a q dest
        # whose dim is not its op's (parser_args.rs "Operation not considered"), so no prover runs one
        if d.dim != op.dim:
            raise _Refuse(f"{where}.dest: dim {d.dim} but the op yields dim {op.dim}")
        ops.append(op)
    return KernelIR(expr.exp_id, extended, tuple(ops))


# ------------------------------------------------------------------------------- serialization
def _arg_to_json(a: Arg | None):
    if a is None:
        return None
    if isinstance(a, Val):
        return ["v", a.id, a.dim]
    return ["l", a.kind, a.dim, a.stage, a.col, a.shift, str(a.value)]


def _arg_from_json(x) -> Arg | None:
    if x is None:
        return None
    if x[0] == "v":
        return Val(int(x[1]), int(x[2]))
    return Leaf(x[1], int(x[2]), int(x[3]), int(x[4]), int(x[5]), int(x[6]))


def ir_to_json(ir: KernelIR) -> dict:
    return {"exp_id": ir.exp_id, "extended": ir.extended,
            "ops": [[o.arith, o.shape, o.dim, _arg_to_json(o.a), _arg_to_json(o.b)] for o in ir.ops]}


def ir_from_json(d: dict) -> KernelIR:
    ops = tuple(Op(o[0], o[1], _arg_from_json(o[3]), _arg_from_json(o[4]), int(o[2])) for o in d["ops"])
    return KernelIR(int(d["exp_id"]), bool(d["extended"]), ops)
