"""codegen.ir: the `.bin` writer's swap rule against every real `.bin`, operand resolution, the
refusal rules (Skip), serialization and the content digest."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from codegen import ir
from codegen.check.binfile import buffer_commit_size, read_bin
from codegen.ir import KernelIR, Leaf, Op, Skip, Val, bin_order, ir_from_json, ir_to_json, lower, rank, swapped
from codegen.model import CmPol, Expression, Operand, StarkInfo, Step, load_air
from require import pk_params, require

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "provingkey-sample"
PK = ROOT.parent / "shared" / "pk"
PK_AIRS = sorted(PK.glob("**/*.starkinfo.json")) if PK.is_dir() else []
ARITH_CODE = {"add": 0, "sub": 1, "mul": 2, "sub_swap": 3}
SHAPE_CODE = {"11": 0, "31": 1, "33": 2}
P = 0xFFFFFFFF00000001


def _air_id(p: Path) -> str:
    return str(p.relative_to(PK)).split("/provingKey/")[-1].replace(".starkinfo.json", "")


def _base(p: Path) -> str:
    return str(p)[: -len(".starkinfo.json")]


# =================================================================== real keys vs the .bin
def _bin_operand_ok(si_json: dict, si: StarkInfo, arg, extended: bool, bin_operand, numbers) -> str:
    """'' if the lowered argument is the operand the interpreter reads, else a description."""
    typ, idx, off = bin_operand
    B = buffer_commit_size(si_json)
    ns = si_json["nStages"]
    if isinstance(arg, Val):
        want = B if arg.dim == 1 else B + 1
        return "" if typ == want else f"tmp dim {arg.dim}: bin type {typ}, want {want}"
    mult = si.blowup if extended else 1
    k = arg.kind
    if k in ("cm", "const"):
        assert arg.shift % mult == 0
        opening = arg.shift // mult
        want = (arg.stage if k == "cm" else 0, arg.col, si.opening_points.index(opening))
        return "" if (typ, idx, off) == want else f"{k}: bin {(typ, idx, off)} want {want}"
    if k == "zi":
        want = (ns + 2, 1 + arg.col, 0)
        return "" if (typ, idx, off) == want else f"zi: bin {(typ, idx, off)} want {want}"
    if k == "number":
        if typ != B + 3 or numbers[idx] != arg.value:
            return f"number {arg.value}: bin type {typ} numbers[{idx}]"
        return ""
    code = {"public": B + 2, "airvalue": B + 4, "proofvalue": B + 5, "airgroupvalue": B + 6,
            "challenge": B + 7, "eval": B + 8}[k]
    return "" if (typ, idx) == (code, arg.col) else f"{k}: bin {(typ, idx)} want {(code, arg.col)}"


def test_pk_present_or_skip() -> None:
    require("pk")
    assert len(PK_AIRS) == 37


@pytest.mark.parametrize("sipath", pk_params(PK_AIRS), ids=_air_id)
def test_lowered_ops_equal_the_bin(sipath: Path) -> None:
    """Every lowered op: arith and shape equal the bin's (arith, ops kind), A and B are the very
    operands the interpreter reads (type code, column / buffer index, opening, literal)."""
    si_json = json.loads(sipath.read_text())
    si, ei = load_air(sipath, _base(sipath) + ".expressionsinfo.json")
    bf = read_bin(_base(sipath) + ".bin")
    res = ir.Resolver(si)
    n_ops = n_lowered = 0
    skipped = []
    for e in ei.expressions:
        extended = e.exp_id == si.cexp_id
        k_ir = lower(si, e, extended, res)
        if isinstance(k_ir, Skip):
            skipped.append(k_ir)
            continue
        n_lowered += 1
        bops = bf.expressions[e.exp_id].ops
        assert [ARITH_CODE[o.arith] for o in k_ir.ops] == [b.arith for b in bops]
        assert [SHAPE_CODE[o.shape] for o in k_ir.ops] == [b.kind for b in bops]
        for k, (op, b, step) in enumerate(zip(k_ir.ops, bops, e.code)):
            assert op.dim == max(s.dim for s in step.src)
            for arg, bo in ((op.a, b.a), (op.b, b.b)):
                msg = _bin_operand_ok(si_json, si, arg, extended, bo, bf.numbers)
                assert msg == "", f"expId {e.exp_id} op {k}: {msg}"
            # which JSON source became A
            sw = swapped(step.src[0], step.src[1])
            a_src = step.src[1] if sw else step.src[0]
            if a_src.type == "tmp":
                assert isinstance(op.a, Val)
            else:
                assert op.a == res.leaf(a_src, extended, "")
            n_ops += 1
    # only the FRI expression (xDivXSubXi) is refused on these keys
    assert [s.exp_id for s in skipped] == [si_json["friExpId"]]
    assert "xDivXSubXi" in skipped[0].reason
    assert n_lowered == len(ei.expressions) - 1
    assert n_ops == sum(len(e.code) for e in ei.expressions if e.exp_id != si_json["friExpId"])


@pytest.mark.parametrize("sipath", pk_params(PK_AIRS), ids=_air_id)
def test_swap_rule_on_every_step(sipath: Path) -> None:
    """ir.bin_order on model operands of every step (FRI included): arith and the A operand's
    type code equal the bin's."""
    si_json = json.loads(sipath.read_text())
    si, ei = load_air(sipath, _base(sipath) + ".expressionsinfo.json")
    bf = read_bin(_base(sipath) + ".bin")
    B = buffer_commit_size(si_json)
    ns = si_json["nStages"]

    def code(o: Operand) -> int:
        if o.type == "cm":
            return si.cm_pols[o.id].stage
        return {"const": 0, "Zi": ns + 2, "xDivXSubXi": ns + 3, "public": B + 2, "number": B + 3,
                "airvalue": B + 4, "proofvalue": B + 5, "airgroupvalue": B + 6, "challenge": B + 7,
                "eval": B + 8, "tmp": B if o.dim == 1 else B + 1}[o.type]

    n = 0
    for e in ei.expressions:
        for step, b in zip(e.code, bf.expressions[e.exp_id].ops):
            arith, a, bb = bin_order(step.op, step.src[0], step.src[1])
            assert ARITH_CODE[arith] == b.arith
            assert (code(a), code(bb)) == (b.a[0], b.b[0])
            assert {(a.dim, bb.dim)} <= {(1, 1), (3, 1), (3, 3)}
            n += 1
    assert n == sum(len(e.code) for e in ei.expressions)


def test_swapped_equal_dim_adds_occur_in_pk() -> None:
    """The only order-sensitive case (spec §1.4) is present in the keys the tests above cover."""
    require("pk")
    count = 0
    for sipath in PK_AIRS:
        _, ei = load_air(sipath, _base(sipath) + ".expressionsinfo.json")
        for e in ei.expressions:
            for s in e.code:
                count += s.op == "add" and s.src[0].dim == s.src[1].dim and swapped(*s.src)
    assert count > 0


# ============================================================================ rank table
@pytest.mark.parametrize("typ,dim,want", [
    ("cm", 1, 0), ("const", 1, 0), ("Zi", 1, 0), ("custom", 1, 0), ("tmp", 1, 1), ("public", 1, 2),
    ("number", 1, 3), ("airvalue", 1, 4), ("proofvalue", 1, 5), ("cm", 3, 6), ("custom", 3, 6),
    ("xDivXSubXi", 3, 6), ("tmp", 3, 7), ("airvalue", 3, 8), ("airgroupvalue", 3, 9),
    ("airgroupvalue", 1, 9), ("proofvalue", 3, 10), ("challenge", 3, 11), ("eval", 3, 12),
])
def test_rank_table(typ: str, dim: int, want: int) -> None:
    assert rank(Operand(typ, dim)) == want


# ============================================================================= hand cases
SI = StarkInfo(
    file="si.json", name="H", airgroup_id=0, air_id=0, n_bits=3, n_bits_ext=5, n_stages=2,
    opening_points=(-1, 0, 1), cm_pols=(CmPol(1, 1, 0), CmPol(1, 1, 1), CmPol(2, 3, 0), CmPol(2, 1, 3)),
    n_constants=2, n_challenges=3, n_publics=2, n_evals=2, airvalue_stages=(1, 2, 1),
    airgroupvalue_stages=(2, 1), proofvalue_stages=(2, 1), boundaries=("everyRow",), cexp_id=9,
    q_dim=3, n_custom_commits=0, section_cols={"cm1": 2, "cm2": 4})
SI2 = replace(SI, boundaries=("everyRow", "firstRow"))


def cm(i: int, prime: int = 0) -> Operand:
    return Operand("cm", SI.cm_pols[i].dim, id=i, prime=prime)


def tmp(i: int, dim: int = 1) -> Operand:
    return Operand("tmp", dim, id=i)


def num(v: int) -> Operand:
    return Operand("number", 1, value=v)


CH0 = Operand("challenge", 3, id=0)
ZI0 = Operand("Zi", 1, boundary_id=0)


def expr(*steps: Step, exp_id: int = 4, index: int = 2) -> Expression:
    return Expression(index, exp_id, 2, tuple(steps))


def st(op: str, dest: Operand, *src: Operand) -> Step:
    return Step(op, dest, tuple(src))


def _lower_ok(e: Expression, extended: bool = False, si: StarkInfo = SI) -> KernelIR:
    r = lower(si, e, extended)
    assert isinstance(r, KernelIR), r
    return r


def test_equal_dim_add_swapped_when_rank_src0_greater() -> None:
    # add(tmp0, cm1): rank 1 > 0 -> swapped: A = cm1 leaf, B = tmp 0
    e = expr(st("mul", tmp(0), cm(0), cm(1, 1)), st("add", tmp(1), tmp(0), cm(1)))
    k = _lower_ok(e)
    assert swapped(tmp(0), cm(1)) and not swapped(cm(1), tmp(0))
    assert k.ops[0] == Op("mul", "11", Leaf("cm", 1, stage=1, col=0), Leaf("cm", 1, stage=1, col=1, shift=1),
                          1)
    assert k.ops[1] == Op("add", "11", Leaf("cm", 1, stage=1, col=1), Val(0, 1), 1)
    # the other JSON order is kept as is
    k2 = _lower_ok(expr(st("mul", tmp(0), cm(0), cm(1, 1)), st("add", tmp(1), cm(1), tmp(0))))
    assert k2.ops[1] == k.ops[1]


def test_equal_ranks_never_swap() -> None:
    c0 = Operand("const", 1, id=1, prime=-1)
    assert not swapped(cm(0), c0) and not swapped(c0, cm(0))
    k = _lower_ok(expr(st("add", tmp(0), c0, cm(0))))
    assert k.ops[0] == Op("add", "11", Leaf("const", 1, col=1, shift=-1), Leaf("cm", 1, stage=1, col=0), 1)
    assert not swapped(tmp(0, 3), tmp(1, 3))
    assert not swapped(CH0, Operand("challenge", 3, id=2))


def test_swapped_sub_becomes_sub_swap() -> None:
    # sub(number 7, cm0): rank 3 > 0 -> swapped; sub_swap computes B - A = 7 - cm0
    k = _lower_ok(expr(st("sub", tmp(0), num(7), cm(0))))
    assert k.ops[0] == Op("sub_swap", "11", Leaf("cm", 1, stage=1, col=0), Leaf("number", 1, value=7), 1)
    assert bin_order("sub", num(7), cm(0)) == ("sub_swap", cm(0), num(7))
    assert bin_order("sub", cm(0), num(7)) == ("sub", cm(0), num(7))
    assert bin_order("mul", num(7), cm(0)) == ("mul", cm(0), num(7))
    assert bin_order("add", num(7), cm(0)) == ("add", cm(0), num(7))


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_mixed_dims_put_dim3_first(op: str) -> None:
    pv1 = Operand("proofvalue", 1, id=1)    # highest dim-1 rank (5)
    av3 = Operand("airvalue", 3, id=1)
    # dim-3 second: swapped whatever the ranks
    for one, three in ((cm(0), CH0), (pv1, cm(2)), (num(3), av3), (tmp(0), Operand("eval", 3, id=1))):
        assert swapped(one, three)
        assert bin_order(op, one, three) == ("sub_swap" if op == "sub" else op, three, one)
        # dim-3 first: kept even where rank(A) > rank(B) (challenge 11 > cm 0)
        assert not swapped(three, one)
        assert bin_order(op, three, one) == (op, three, one)
    k = _lower_ok(expr(st(op, tmp(0, 3), cm(0, -1), CH0)))
    want = "sub_swap" if op == "sub" else op
    assert k.ops[0] == Op(want, "31", Leaf("challenge", 3, col=0), Leaf("cm", 1, stage=1, col=0, shift=-1), 3)
    k = _lower_ok(expr(st(op, tmp(0, 3), CH0, cm(0, -1))))
    assert k.ops[0] == Op(op, "31", Leaf("challenge", 3, col=0), Leaf("cm", 1, stage=1, col=0, shift=-1), 3)


def test_dim3_pairs_by_rank() -> None:
    # cm3 (6) < tmp3 (7) < airvalue3 (8) < airgroupvalue (9) < proofvalue3 (10) < challenge (11) < eval (12)
    chain = [cm(2), tmp(0, 3), Operand("airvalue", 3, id=1), Operand("airgroupvalue", 3, id=0),
             Operand("proofvalue", 3, id=0), CH0, Operand("eval", 3, id=0)]
    for i, a in enumerate(chain):
        for j, b in enumerate(chain):
            assert swapped(a, b) == (i > j), (a, b)


def test_leaf_resolution_trace_and_extended() -> None:
    e = expr(
        st("mul", tmp(0, 3), cm(2, 1), Operand("airvalue", 3, id=1)),               # av pos 1
        st("mul", tmp(1, 3), tmp(0, 3), Operand("airgroupvalue", 3, id=0)),       # agv pos 0
        st("add", tmp(2), Operand("airvalue", 1, id=2), Operand("airgroupvalue", 1, id=1)),  # 4, 3
        st("add", tmp(3, 3), tmp(1, 3), tmp(2)),
        st("mul", tmp(4, 3), tmp(3, 3), Operand("proofvalue", 3, id=0)),          # pv pos 0
        st("sub", tmp(5), Operand("proofvalue", 1, id=1), Operand("public", 1, id=1)),  # pv pos 3
        st("mul", tmp(6, 3), tmp(4, 3), tmp(5)),
        st("add", tmp(7, 3), tmp(6, 3), Operand("eval", 3, id=1)),
        st("mul", tmp(8, 3), tmp(7, 3), Operand("challenge", 3, id=2)),
        st("mul", tmp(9, 3), tmp(8, 3), cm(3, -1)),
    )
    k = _lower_ok(e)
    assert [o.a for o in k.ops][:3] == [Leaf("cm", 3, stage=2, col=0, shift=1), Val(0, 3),
                                        Leaf("airvalue", 1, col=4)]
    assert k.ops[0].b == Leaf("airvalue", 3, col=1)
    assert k.ops[1].b == Leaf("airgroupvalue", 3, col=0)
    # add(airvalue dim 1 (rank 4), airgroupvalue dim 1 (rank 9)): kept
    assert k.ops[2] == Op("add", "11", Leaf("airvalue", 1, col=4), Leaf("airgroupvalue", 1, col=3), 1)
    assert k.ops[4].b == Leaf("proofvalue", 3, col=0)
    assert k.ops[5] == Op("sub_swap", "11", Leaf("public", 1, col=1), Leaf("proofvalue", 1, col=3), 1)
    assert k.ops[7].b == Leaf("eval", 3, col=3)
    assert k.ops[8].b == Leaf("challenge", 3, col=6)
    assert k.ops[9].b == Leaf("cm", 1, stage=2, col=3, shift=-1)
    assert k.out_dim == 3 and not k.extended
    # extended: shift = prime * blowup (4)
    q = expr(st("mul", tmp(0), cm(0, -1), cm(1, 1)), st("mul", Operand("q", 1), tmp(0), ZI0), exp_id=9)
    kq = _lower_ok(q, extended=True)
    assert kq.ops[0] == Op("mul", "11", Leaf("cm", 1, stage=1, col=0, shift=-4),
                           Leaf("cm", 1, stage=1, col=1, shift=4), 1)
    assert kq.ops[1] == Op("mul", "11", Leaf("zi", 1, col=0), Val(0, 1), 1)   # tmp1 rank 1 > Zi 0
    assert kq.extended and kq.out_dim == 1


def test_copy_op() -> None:
    k = _lower_ok(expr(st("copy", tmp(0), cm(1, 1)), st("copy", tmp(1, 3), CH0),
                       st("mul", tmp(2, 3), tmp(0), tmp(1, 3)), st("copy", tmp(3, 3), tmp(2, 3))))
    assert k.ops == (Op("copy", "1", Leaf("cm", 1, stage=1, col=1, shift=1), None, 1),
                     Op("copy", "3", Leaf("challenge", 3, col=0), None, 3),
                     Op("mul", "31", Val(1, 3), Val(0, 1), 3),
                     Op("copy", "3", Val(2, 3), None, 3))
    assert k.ops[0].args() == (Leaf("cm", 1, stage=1, col=1, shift=1),)
    assert k.ops[2].args() == (Val(1, 3), Val(0, 1))


def test_last_op_into_q() -> None:
    k = _lower_ok(expr(st("mul", tmp(0, 3), cm(2), CH0), st("mul", Operand("q", 3), tmp(0, 3), ZI0),
                       exp_id=9), extended=True)
    assert k.ops[-1] == Op("mul", "31", Val(0, 3), Leaf("zi", 1), 3)
    assert k.out_dim == 3
    # (a q dest of another dim than its op's: test_q_dest_dim_mismatch)


# ----------------------------------------------------------------------------- refusals
def _skip(e: Expression, extended: bool = False, si: StarkInfo = SI) -> str:
    r = lower(si, e, extended)
    assert isinstance(r, Skip), r
    assert r.exp_id == e.exp_id
    return r.reason


def test_tmp_written_twice_is_not_ssa() -> None:
    reason = _skip(expr(st("add", tmp(5), cm(0), cm(1)), st("mul", tmp(5), tmp(5), cm(0)), index=7))
    assert reason == "expressionsCode[7].code[1].dest: tmp 5 is written twice (not SSA)"


def test_tmp_read_before_write_is_not_ssa() -> None:
    reason = _skip(expr(st("add", tmp(0), cm(0), cm(1)), st("mul", tmp(1), cm(0), tmp(3)), index=3))
    assert reason == "expressionsCode[3].code[1].src[1]: tmp 3 is read before it is written (not SSA)"
    # self-reference is also a read before write
    assert "not SSA" in _skip(expr(st("add", tmp(0), tmp(0), cm(1))))


def test_tmp_read_with_wrong_dim() -> None:
    reason = _skip(expr(st("add", tmp(0), cm(0), cm(1)), st("mul", tmp(1, 3), tmp(0, 3), CH0), index=1))
    assert reason == "expressionsCode[1].code[1].src[0]: tmp 0 has dim 1, read as dim 3"


def test_dest_dim_mismatch() -> None:
    reason = _skip(expr(st("mul", tmp(0), cm(0), CH0), index=0))
    assert reason == "expressionsCode[0].code[0].dest: dim 1 but the op yields dim 3"


@pytest.mark.parametrize("qdim, op", [(3, "sub"), (1, "mul")])
def test_q_dest_dim_mismatch(qdim: int, op: str) -> None:
    """A q dest whose dim is not its op's is refused, not let through on the last op as if "the
    writer rewrites the dest" (the Q kernel would store the op's dim; the oracle refuses to compare). The writer
    turns that dest into a tmp of the same dim and then looks the op up by (dest dim, source dims):
    "Operation not considered" (parser_args.rs), no .bin; no AIR of ../shared/pk or the sample has
    one. Refused like any other dest, the AIR goes to the interpreter."""
    a = st("mul", tmp(0, 3), cm(0), CH0)
    last = st(op, Operand("q", qdim), tmp(0, 3) if qdim == 1 else cm(0), ZI0 if qdim == 1 else cm(1))
    reason = _skip(expr(a, last, exp_id=9, index=2), extended=True)
    want = 3 if qdim == 1 else 1
    assert reason == f"expressionsCode[2].code[1].dest: dim {qdim} but the op yields dim {want}"


def test_zi_boundary_1_skipped() -> None:
    zi1 = Operand("Zi", 1, boundary_id=1)
    q = expr(st("mul", tmp(0), cm(0), zi1), st("mul", Operand("q", 1), tmp(0), ZI0), exp_id=9, index=5)
    reason = _skip(q, extended=True, si=SI2)
    assert reason.startswith("expressionsCode[5].code[0].src[1]: Zi boundary 1")
    assert "everyRow" in reason
    # boundary 0 of the same key lowers
    ok = expr(st("mul", tmp(0), cm(0), ZI0), st("mul", Operand("q", 1), tmp(0), ZI0), exp_id=9)
    assert isinstance(lower(SI2, ok, True), KernelIR)


def test_zi_outside_q_skipped() -> None:
    reason = _skip(expr(st("mul", tmp(0), cm(0), ZI0), index=4))
    assert reason == "expressionsCode[4].code[0].src[1]: Zi outside the Q expression"


def test_sample_skipped_air_q_is_refused() -> None:
    d = SAMPLE / "synth/Basic/airs/Skipped/air"
    si, ei = load_air(d / "Skipped.starkinfo.json", d / "Skipped.expressionsinfo.json")
    assert si.boundaries == ("everyRow", "firstRow")
    r = lower(si, ei.by_id()[si.cexp_id], True)
    assert isinstance(r, Skip) and "Zi boundary 1" in r.reason and "not evaluated" not in r.reason


@pytest.mark.parametrize("o,words", [
    (Operand("xDivXSubXi", 3, id=1), "operand xDivXSubXi (FRI) is not evaluated by the GPU prover"),
    (Operand("custom", 1, id=0), "operand custom commit is not evaluated by the GPU prover"),
    (Operand("x", 1), "operand x is not evaluated by the GPU prover"),
    (Operand("q", 3), "operand type q cannot be a source"),
])
def test_unsupported_operands_skipped(o: Operand, words: str) -> None:
    d = max(o.dim, 1)
    reason = _skip(expr(st("mul", tmp(0, d), o, cm(0)), index=6))
    assert reason == f"expressionsCode[6].code[0].src[0]: {words}"


def test_fri_of_sample_is_skipped() -> None:
    d = SAMPLE / "synth/Basic/airs/Tiny/air"
    si, ei = load_air(d / "Tiny.starkinfo.json", d / "Tiny.expressionsinfo.json")
    r = lower(si, ei.by_id()[51], False)
    assert isinstance(r, Skip) and "xDivXSubXi" in r.reason


def test_non_tmp_dest_before_last_op() -> None:
    reason = _skip(expr(st("add", Operand("q", 1), cm(0), cm(1)), st("add", tmp(1), cm(0), cm(1)), index=2),
                   extended=True)
    assert reason == "expressionsCode[2].code[0].dest: a q destination before the last op"
    # a q dest on the trace domain is refused even on the last op
    reason = _skip(expr(st("add", Operand("q", 1), cm(0), cm(1)), index=2))
    assert reason == "expressionsCode[2].code[0].dest: a q destination before the last op"
    reason = _skip(expr(st("add", cm(0), cm(0), cm(1)), index=2))
    assert reason == "expressionsCode[2].code[0].dest: a cm destination before the last op"


def test_empty_expression() -> None:
    assert _skip(expr()) == "expression 4 is empty"


# ======================================================================= serialization/digest
def _sample_irs() -> list[KernelIR]:
    out = []
    for name in ("Tiny", "Medium"):
        d = SAMPLE / f"synth/Basic/airs/{name}/air"
        si, ei = load_air(d / f"{name}.starkinfo.json", d / f"{name}.expressionsinfo.json")
        for e in ei.expressions:
            r = lower(si, e, e.exp_id == si.cexp_id)
            if isinstance(r, KernelIR):
                out.append(r)
    return out


def test_round_trip_json() -> None:
    irs = _sample_irs()
    assert len(irs) == 18          # Tiny 3 + Medium 15 (the FRI expressions are skipped)
    big = KernelIR(3, True, (
        Op("add", "11", Leaf("number", 1, value=(1 << 64) - 1), Leaf("cm", 1, stage=2, col=7, shift=-8), 1),
        Op("sub_swap", "31", Leaf("challenge", 3, col=3), Val(0, 1), 3),
        Op("copy", "3", Val(1, 3), None, 3),
        Op("mul", "33", Val(2, 3), Leaf("eval", 3, col=9), 3),
    ))
    for k in irs + [big]:
        js = ir_to_json(k)
        back = ir_from_json(json.loads(json.dumps(js)))
        assert back == k
        assert back.digest() == k.digest()
    # numbers are stored as decimal strings (no float rounding of values >= 2^53)
    assert ir_to_json(big)["ops"][0][3] == ["l", "number", 1, 0, 0, 0, "18446744073709551615"]
    assert ir_to_json(big)["ops"][2] == ["copy", "3", 3, ["v", 1, 3], None]


def test_digest_stable_across_processes() -> None:
    k = KernelIR(5, False, (Op("add", "11", Leaf("number", 1, value=P), Leaf("cm", 1, stage=1, col=2), 1),
                            Op("mul", "31", Leaf("challenge", 3, col=0), Val(0, 1), 3)))
    code = ("from codegen.ir import *\n"
            "k = KernelIR(5, False, (Op('add', '11', Leaf('number', 1, value=%d), Leaf('cm', 1, stage=1, col=2), 1),"
            " Op('mul', '31', Leaf('challenge', 3, col=0), Val(0, 1), 3)))\nprint(k.digest())" % P)
    outs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outs.add(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                check=True, cwd=ROOT).stdout.strip())
    assert outs == {k.digest()}
    assert len(k.digest()) == 64 and int(k.digest(), 16) >= 0


def test_digest_changes_with_any_op_change() -> None:
    base = KernelIR(5, True, (
        Op("add", "11", Leaf("number", 1, value=3), Leaf("cm", 1, stage=1, col=2, shift=2), 1),
        Op("mul", "31", Leaf("challenge", 3, col=0), Val(0, 1), 3),
        Op("sub", "33", Val(1, 3), Leaf("eval", 3, col=3), 3),
    ))
    variants = [
        replace(base, exp_id=6),
        replace(base, extended=False),
        replace(base, ops=base.ops[:2]),
        replace(base, ops=(replace(base.ops[0], arith="sub"),) + base.ops[1:]),
        replace(base, ops=(replace(base.ops[0], a=Leaf("number", 1, value=4)),) + base.ops[1:]),
        replace(base, ops=(replace(base.ops[0], b=Leaf("cm", 1, stage=1, col=2, shift=-2)),) + base.ops[1:]),
        replace(base, ops=(replace(base.ops[0], b=Leaf("cm", 1, stage=2, col=2, shift=2)),) + base.ops[1:]),
        replace(base, ops=(replace(base.ops[0], b=Leaf("cm", 1, stage=1, col=3, shift=2)),) + base.ops[1:]),
        replace(base, ops=(replace(base.ops[0], a=base.ops[0].b, b=base.ops[0].a),) + base.ops[1:]),
        replace(base, ops=base.ops[:2] + (replace(base.ops[2], arith="sub_swap"),)),
        replace(base, ops=base.ops[:2] + (replace(base.ops[2], b=Leaf("challenge", 3, col=3)),)),
        replace(base, ops=base.ops[:1] + (replace(base.ops[1], b=Val(0, 1), a=Leaf("challenge", 3, col=3)),)
                + base.ops[2:]),
    ]
    digests = {base.digest()} | {v.digest() for v in variants}
    assert len(digests) == 1 + len(variants)
    assert base.digest() == KernelIR(5, True, tuple(base.ops)).digest()
