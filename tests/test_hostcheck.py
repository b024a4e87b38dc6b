"""codegen.check.hostcheck: every AIR of the sample and of ../shared/pk is bit-identical to the oracle
(generated TUs compiled with g++, called through the C ABI), the check can fail, and raw_words
draws the words that matter."""
from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

from codegen import emit, render_model
from codegen.check import hostcheck
from codegen.check import reference
from codegen.discover import discover
from codegen.emit import render
from codegen.check.hostcheck import EDGE, EPS, P, POISON, CheckResult, check_air, check_kernel, raw_words
from codegen.coverage import cover
from codegen.model import load_air, parse_expressionsinfo, parse_starkinfo
from require import pk_params, require, requires

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "provingkey-sample"
PK = ROOT.parent / "shared" / "pk"
pytestmark = requires("gxx")      # tests/require.py: skip, or fail under EXPS_REQUIRE

#: AIRs whose host check takes more than ~5 s
SLOW = {"Large", "ConnectionNew", "Intermediates"}


def _params(root: Path) -> list:
    if not root.is_dir():
        return []
    out = []
    for p in discover(root):
        marks = [pytest.mark.slow] if p.base in SLOW else []
        rel = p.rel.split("/provingKey/")[-1] if "/provingKey/" in p.rel else p.rel
        out.append(pytest.param(p, marks=marks, id=rel.replace("/airs/", "/")))
    return out


def _expected_counts(si, cov) -> tuple[int, int, int]:
    """(q_words, expr_checks, expr_words) check_kernel must report for this AIR, per draw."""
    n_ext = min(max(1 << si.n_bits_ext, 1024), 1 << 13)
    n = min(max(1 << si.n_bits, 64), 1 << 13)
    chunked = len(cov.q.ops) > 512                     # default_ops_per_chunk: 256 above 512 ops
    q_words = 3 * n_ext * (3 if chunked else 1)        # ample, 3 blocks and 1 block of scratch when chunked
    # per expression: destDim {1, 3} x {WRITE, MUL_INV, WRITE_INV} x {col, expr}, whatever vdim,
    # plus one N == 0 call
    checks = 13 * len(cov.exprs)
    words = 24 * n * len(cov.exprs)                    # 6 x n (destDim 1) + 6 x 3n (destDim 3)
    return q_words, checks, words


#: each AIR's kernel is compiled once and checked on this many input draws, each with its own
#: columns and scalars (publics, challenges, evals, air / airgroup / proof values): a scalar operand
#: whose word makes an op's operand order show (v or v + p) is in some draws, not in all
SEEDS = (1, 2, 3)


def _run(p) -> tuple[CheckResult, object, object]:
    si, ei = load_air(p.starkinfo, p.expressions)
    cov = cover(si, ei)
    assert cov.air_skip == ""
    ks = hostcheck.kernel_source(p.key, cov)
    si_json, ei_json = json.loads(p.starkinfo.read_text()), json.loads(p.expressions.read_text())
    res = CheckResult()
    with tempfile.TemporaryDirectory(prefix="exps-hostcheck-") as d:
        lib = hostcheck._load(hostcheck.build_host_library(render(ks), Path(d)))
        for seed in SEEDS:
            r = check_kernel(si, si_json, ei_json, ks, lib, seed=seed)
            res.q_words += r.q_words
            res.expr_checks += r.expr_checks
            res.expr_words += r.expr_words
            res.mismatches += [f"seed {seed}: {m}" for m in r.mismatches]
    return res, si, cov


# ====================================================================== the sample key
SAMPLE_PARAMS = [x for x in _params(SAMPLE) if x.values[0].base != "Skipped"]


def test_sample_param_list() -> None:
    assert sorted(x.id for x in SAMPLE_PARAMS) == [
        "synth/Basic/Large/air/Large", "synth/Basic/Medium/air/Medium", "synth/Basic/Tiny/air/Tiny",
        "synth/Rec/Shared/recursive1/Shared", "synth/Rec/Shared/recursive2/Shared"]


@pytest.mark.parametrize("p", SAMPLE_PARAMS)
def test_sample_air_bit_identical(p) -> None:
    res, si, cov = _run(p)
    assert res.mismatches == []
    assert res.ok
    assert (res.q_words, res.expr_checks, res.expr_words) == tuple(len(SEEDS) * x for x in _expected_counts(si, cov))


def test_sample_coverage() -> None:
    """What each sample AIR's kernel covers: Q and every trace-domain expression but the FRI one
    (xDivXSubXi: the GPU prover never evaluates it), except the AIR whose Q needs a zerofier the
    prover does not compute, which gets nothing."""
    got = {}
    for p in discover(SAMPLE):
        si, ei = load_air(p.starkinfo, p.expressions)
        cov = cover(si, ei)
        si_json, ei_json = json.loads(p.starkinfo.read_text()), json.loads(p.expressions.read_text())
        if p.base == "Skipped":
            assert cov.air_skip and cov.q is None and cov.exprs == [], p.rel
            continue
        fri, n_expr = si_json["friExpId"], len(ei_json["expressionsCode"])
        assert cov.air_skip == "" and cov.q_ops == len(cov.q.ops) > 0, p.rel
        assert [s.exp_id for s in cov.skipped_exprs] == [fri], p.rel
        assert sorted(x.ir.exp_id for x in cov.exprs) == sorted(
            e["expId"] for e in ei_json["expressionsCode"] if e["expId"] not in (fri, si_json["cExpId"])), p.rel
        assert len(cov.exprs) == n_expr - 2
        got[p.base] = True
    assert sorted(got) == ["Large", "Medium", "Shared", "Tiny"]


def test_sample_skipped_air() -> None:
    [p] = [p for p in discover(SAMPLE) if p.base == "Skipped"]
    si, ei = load_air(p.starkinfo, p.expressions)
    cov = cover(si, ei)
    assert cov.q is None and cov.exprs == []
    assert cov.air_skip == (f"{p.starkinfo}: boundaries ['everyRow', 'firstRow']: the GPU prover computes "
                            "only the everyRow zerofier")


# ========================================================================== ../shared/pk
PK_PARAMS = _params(PK)


def test_pk_present_or_skip() -> None:
    require("pk")
    assert len(PK_PARAMS) == 37


@pytest.mark.parametrize("p", pk_params(PK_PARAMS))
def test_pk_air_bit_identical(p) -> None:
    res, si, cov = _run(p)
    assert res.mismatches == []
    assert (res.q_words, res.expr_checks, res.expr_words) == tuple(len(SEEDS) * x for x in _expected_counts(si, cov))
    # every trace-domain expression is covered; only the FRI expression is skipped
    fri = json.loads(p.starkinfo.read_text())["friExpId"]
    n_expr = len(json.loads(p.expressions.read_text())["expressionsCode"])
    assert [s.exp_id for s in cov.skipped_exprs] == [fri]
    assert len(cov.exprs) == n_expr - 2


# ============================================================================= the check fails
SI = {
    "name": "Neg", "airgroupId": 0, "airId": 0, "nStages": 2, "starkStruct": {"nBits": 3, "nBitsExt": 4},
    "cmPolsMap": [{"stage": 1, "dim": 1, "stagePos": 0}, {"stage": 1, "dim": 1, "stagePos": 1}],
    "mapSectionsN": {"const": 0, "cm1": 2, "cm2": 0, "cm3": 0}, "openingPoints": [0, 1],
    "boundaries": [{"name": "everyRow"}], "nConstants": 0, "nPublics": 0, "challengesMap": [], "evMap": [],
    "cExpId": 1, "qDim": 1,
}
CM0 = {"type": "cm", "id": 0, "prime": 0, "dim": 1}
CM1 = {"type": "cm", "id": 1, "prime": 1, "dim": 1}
EI = {"expressionsCode": [
    {"expId": 1, "code": [
        {"op": "add", "dest": {"type": "tmp", "id": 0, "dim": 1}, "src": [CM1, CM0]},
        {"op": "mul", "dest": {"type": "q", "id": 0, "dim": 1},
         "src": [{"type": "tmp", "id": 0, "dim": 1}, {"type": "Zi", "boundaryId": 0, "dim": 1}]}]},
    {"expId": 2, "code": [{"op": "sub", "dest": {"type": "tmp", "id": 0, "dim": 1}, "src": [CM0, CM1]}]},
]}


def _check_text(files: dict[str, str], si, si_json, ei_json, ks) -> CheckResult:
    with tempfile.TemporaryDirectory(prefix="exps-neg-") as d:
        lib = hostcheck._load(hostcheck.build_host_library(files, Path(d)))
        return check_kernel(si, si_json, ei_json, ks, lib)


TU = "neg_q0_x0.cu"


def _neg_setup(opc: int = 0):
    si = parse_starkinfo(SI, "neg.starkinfo.json")
    ei = parse_expressionsinfo(EI, "neg.expressionsinfo.json", si)
    cov = cover(si, ei)
    ks = hostcheck.kernel_source("neg", cov, opc)
    return si, ks, render(ks)          # a small kernel: one device TU, neg_q0_x0.cu (Q, expressions)


def test_uncorrupted_control() -> None:
    si, ks, files = _neg_setup()
    res = _check_text(files, si, SI, EI, ks)
    assert res.mismatches == [] and res.q_words == 3 * 1024 and res.expr_checks == 13


def test_swapped_add_operands_are_detected() -> None:
    """JSON add(cm1', cm0) is kept in that order (equal ranks); running it as add(cm0, cm1') is
    field-equal but not bit-identical (only the left operand is canonicalised)."""
    si, ks, files = _neg_setup()
    q = files[TU]
    # cm1' (opening 1 x blowup 2) and cm0, at their offsets from the row bases of shift 2 and 0
    # (render_model.Offsets: the Q kernel's exps_offs entries)
    m = re.search(r"gl_add\((EXPS_LD\(\(const uint64_t\*\)\(exps_rb_p2 \+ O\.v\[\d+\]\)\)), "
                  r"(EXPS_LD\(\(const uint64_t\*\)\(exps_rb \+ O\.v\[\d+\]\)\))\)", q)
    assert m, q
    line, a, b = m.group(0), m.group(1), m.group(2)
    assert q.count(line) == 1
    files = dict(files, **{TU: q.replace(line, f"gl_add({b}, {a})")})
    res = _check_text(files, si, SI, EI, ks)
    assert len(res.mismatches) == 1
    assert res.mismatches[0].startswith("Q (scratch 0): ")
    n_diff = int(re.search(r"(\d+) words differ", res.mismatches[0]).group(1))
    assert 0 < n_diff < 1024          # only rows where an operand is >= p (raw words) differ


def test_add_replaced_by_sub_is_detected() -> None:
    si, ks, files = _neg_setup()
    q = files[TU]
    assert q.count("gl_add(") == 1
    res = _check_text({**files, TU: q.replace("gl_add(", "gl_sub(")}, si, SI, EI, ks)
    assert [m.split(":")[0] for m in res.mismatches] == ["Q (scratch 0)"]


def test_corrupted_expression_is_detected_in_every_mode() -> None:
    si, ks, files = _neg_setup()
    x = files[TU]
    assert x.count("gl_sub(") == 1
    res = _check_text({**files, TU: x.replace("gl_sub(", "gl_add(")}, si, SI, EI, ks)
    labels = sorted(m.split(":")[0] for m in res.mismatches)
    assert labels == sorted(f"expr 2 {m} destDim {d} {w}" for d in (1, 3) for m in ("WRITE", "MUL_INV", "WRITE_INV")
                            for w in ("col", "expr"))


def test_corrupted_scratch_slot_is_detected() -> None:
    """Chunked (1 op per chunk): storing the crossing value into the wrong slot is caught under
    all three scratch sizes (the load then reads poison)."""
    si, ks, files = _neg_setup(opc=1)
    assert ks.plan.n_chunks == 2 and ks.plan.total_slots == 1
    q0 = "neg_q0.cu"        # a chunked Q: its first chunk's TU (the last chunk alone: neg_q1.cu)
    assert {"neg_q0.cu", "neg_q1.cu", "neg_x0.cu"} <= set(files)
    q = files[q0]
    [store] = re.findall(r"\(\*\(uint64_t\*\)\(exps_sb \+ O\.v\[\d+\]\)\) = v0;", q)
    assert q.count(store) == 1
    control = _check_text(files, si, SI, EI, ks)
    assert control.mismatches == [] and control.q_words == 3 * 3 * 1024
    res = _check_text({**files, q0: q.replace(store, store.replace("= v0;", "= v0 + 1;"))},
                      si, SI, EI, ks)
    assert sorted(m.split(":")[0] for m in res.mismatches) == [
        "Q (scratch 2048)", "Q (scratch 256)", "Q (scratch 768)"]


def _tiny_chunked(opc: int = 8):
    [p] = [p for p in discover(SAMPLE) if p.base == "Tiny"]
    si, ei = load_air(p.starkinfo, p.expressions)
    ks = hostcheck.kernel_source(p.key, cover(si, ei), opc)
    return si, ks, render(ks), json.loads(p.starkinfo.read_text()), json.loads(p.expressions.read_text())


@pytest.mark.parametrize("wrong", ["words = (index ? index - 1 : 0) * wave;", "words = index * (wave / 2);"])
def test_wrong_scratch_offsets_of_the_launcher_are_detected(wrong: str) -> None:
    """The launcher computes each Q kernel's exps_offs (exps_runtime.cpp q_offsets) and the host
    form gets the same words as the kernel: scratch slots at the wrong offsets from the wave's
    scratch (two slots at one offset; half the wave's stride) are caught. (Mutations that stay
    inside the scratch: one that writes past it would corrupt the test's own heap.)"""
    si, ks, files, si_json, ei_json = _tiny_chunked()
    assert ks.plan.n_chunks > 2 and ks.plan.total_slots >= 2
    assert _check_text(files, si, si_json, ei_json, ks).mismatches == []
    rt = (emit.TEMPLATES / emit.RUNTIME).read_text()
    assert rt.count("words = index * wave;") == 1
    res = _check_text({**files, emit.RUNTIME: rt.replace("words = index * wave;", wrong)}, si, si_json, ei_json, ks)
    assert res.mismatches and all(m.startswith("Q (scratch ") for m in res.mismatches), (wrong, res.mismatches)


def test_wrong_column_offsets_of_the_launcher_are_detected() -> None:
    """The same for the stage-1 columns: each read from its neighbour (column 0 from column 1)."""
    si, ks, files = _neg_setup()
    rt = (emit.TEMPLATES / emit.RUNTIME).read_text()
    right = "if (kind == EXPS_OFF_CM1) words = o1 + index * D;"
    assert rt.count(right) == 1
    wrong = "if (kind == EXPS_OFF_CM1) words = o1 + (index ? index - 1 : 1) * D;"
    res = _check_text({**files, emit.RUNTIME: rt.replace(right, wrong)}, si, SI, EI, ks)
    assert [m.split(":")[0] for m in res.mismatches] == ["Q (scratch 0)"]


def test_wrong_trace_offsets_of_the_launcher_are_detected() -> None:
    """The trace-domain expressions' offsets (exps_runtime.cpp x_offsets): a stage-1 column
    of the trace read from its neighbour is caught in every launch of every expression that reads
    one, and in none else (the Q reads stage 1 from the aux trace)."""
    p, si, cov, si_json, ei_json = _medium()
    ks = hostcheck.kernel_source(p.key, cov)
    files = render(ks)
    xs = emit.x_parts(ks)
    readers = {int(d["exp_id"]) for d in xs if any(o >> 32 == render_model.OFF_TRACE for o in d["offs"])}
    assert readers and len(readers) < len(xs)
    assert _check_text(files, si, si_json, ei_json, ks).mismatches == []
    rt = (emit.TEMPLATES / emit.RUNTIME).read_text()
    right = "else if (kind == EXPS_OFF_CONST || kind == EXPS_OFF_TRACE) words = index * D;"
    assert rt.count(right) == 1
    wrong = ("else if (kind == EXPS_OFF_CONST) words = index * D;\n"
             "        else if (kind == EXPS_OFF_TRACE) words = (index ? index - 1 : 1) * D;")
    res = _check_text({**files, emit.RUNTIME: rt.replace(right, wrong)}, si, si_json, ei_json, ks)
    hit = {int(m.split()[1]) for m in res.mismatches if m.startswith("expr ")}
    assert hit == readers and all(m.startswith("expr ") for m in res.mismatches), res.mismatches[:5]


def test_wrong_literal_words_of_the_launcher_are_detected() -> None:
    """Expressions that differ only in their number literals share one kernel and read the
    literals that differ from their exps_offs (kind EXPS_OFF_WORD, copied by the launcher): a
    literal word off by one is caught in every launch of exactly the expressions that read one
    (../shared/pk's Lookup0: its bus ids), and the control is bit-identical."""
    require("pk")
    [p] = [p for p in discover(PK / "lookup" / "provingKey") if p.base == "Lookup0"]
    si, ei = load_air(p.starkinfo, p.expressions)
    ks = hostcheck.kernel_source(p.key, cover(si, ei))
    files = render(ks)
    xs = emit.x_parts(ks)
    readers = {int(d["exp_id"]) for d in xs if any(o >> 32 == render_model.OFF_WORD for o in d["offs"])}
    assert len(readers) == 4 and len(readers) < len(xs)
    si_json, ei_json = json.loads(p.starkinfo.read_text()), json.loads(p.expressions.read_text())
    assert _check_text(files, si, si_json, ei_json, ks).mismatches == []
    rt = (emit.TEMPLATES / emit.RUNTIME).read_text()
    right = "o.v[i] = index;"
    assert rt.count(right) == 1
    res = _check_text({**files, emit.RUNTIME: rt.replace(right, "o.v[i] = index + 1;")}, si, si_json, ei_json, ks)
    hit = {int(m.split()[1]) for m in res.mismatches if m.startswith("expr ")}
    assert hit == readers and all(m.startswith("expr ") for m in res.mismatches), res.mismatches[:5]


def test_sample_add_to_sub_is_detected() -> None:
    """The same on a real-size kernel: Tiny's first gl_add in Q becomes gl_sub."""
    [p] = [p for p in discover(SAMPLE) if p.base == "Tiny"]
    si, ei = load_air(p.starkinfo, p.expressions)
    cov = cover(si, ei)
    ks = hostcheck.kernel_source(p.key, cov)
    files = render(ks)
    name = f"{p.key}_q0_x0.cu"                # one device TU of its own; Q comes first in it
    assert list(files) == [name, "exps_xinv.cu", f"{p.key}_abi.cpp"]
    files[name] = files[name].replace("gl_add(", "gl_sub(", 1)
    res = _check_text(files, si, json.loads(p.starkinfo.read_text()), json.loads(p.expressions.read_text()), ks)
    assert [m.split(":")[0] for m in res.mismatches] == ["Q (scratch 0)"]


# ============================================================================== raw words
def test_raw_words_draws_what_matters() -> None:
    w = raw_words(np.random.default_rng(3), (20000,))
    assert w.dtype == np.uint64 and w.shape == (20000,)
    vals = [int(x) for x in w]
    s = set(vals)
    # every edge value, every small int 0..16
    assert {int(x) for x in EDGE} <= s
    assert set(range(17)) <= s
    assert {0, 1, 2, 3, EPS - 1, EPS, EPS + 1, P - 2, P - 1, P, P + 1, P + 2, 1 << 63, (1 << 64) - 2,
            (1 << 64) - 1, 1 << 32, (1 << 32) - 2} == {int(x) for x in EDGE}
    ge_p = sum(v >= P for v in vals)
    small = sum(v < EPS for v in vals)                       # the values with two encodings
    big = sum(v >= 1 << 32 and v not in {int(x) for x in EDGE} for v in vals)
    # 40% uniform (~all >= 2^32), 20% edge (5/17 of them >= p), 20% small, 20% selectors
    assert 0.37 * 20000 < big < 0.43 * 20000
    assert 0.04 * 20000 < ge_p < 0.08 * 20000
    assert 0.45 * 20000 < small < 0.55 * 20000
    assert sum(v in (0, 1) for v in vals) > 0.2 * 20000


def test_raw_words_shapes_and_determinism() -> None:
    a = raw_words(np.random.default_rng(9), (3, 5))
    b = raw_words(np.random.default_rng(9), (3, 5))
    assert a.shape == (3, 5) and a.dtype == np.uint64 and np.array_equal(a, b)
    s = raw_words(np.random.default_rng(9), ())
    assert s.shape == () and isinstance(int(s), int)
    assert not np.array_equal(raw_words(np.random.default_rng(1), (64,)), raw_words(np.random.default_rng(2), (64,)))


def test_buffers_layout() -> None:
    [p] = [p for p in discover(SAMPLE) if p.base == "Medium"]
    si, _ = load_air(p.starkinfo, p.expressions)
    cols = hostcheck.stage_cols(si)
    assert cols == {1: si.section_cols["cm1"], 2: si.section_cols["cm2"], 3: si.section_cols["cm3"]}
    buf = hostcheck.make_buffers(si, 128, 32, np.random.default_rng(0))
    # extended sections, then zi, then trace sections, back to back
    pos = 0
    for s in (1, 2, 3):
        assert buf.off_ext[s] == pos
        pos += cols[s] * 128
    assert buf.off_zi == pos
    pos += 128
    for s in (1, 2, 3):
        assert buf.off_trace[s] == pos
        pos += cols[s] * 32
    assert buf.aux.size == pos
    assert buf.const_ext.size == si.n_constants * 128 and buf.const_trace.size == si.n_constants * 32
    assert buf.scalars["airvalues"].size == 1 + 3 + 1
    assert buf.scalars["airgroupvalues"].size == 6 and buf.scalars["proofvalues"].size == 4
    assert buf.scalars["publics"].size == 3 and buf.scalars["challenges"].size == 3 * si.n_challenges
    d = buf.domain(si, True, 128)
    assert d.cm[2].shape == (cols[2], 128) and np.array_equal(d.zi, buf.aux[buf.off_zi: buf.off_zi + 128])
    assert buf.domain(si, False, 32).zi is None


def test_default_ops_per_chunk() -> None:
    assert [hostcheck.default_ops_per_chunk(n) for n in (1, 512, 513, 40000)] == [0, 0, 256, 256]


def test_check_result_ok() -> None:
    assert CheckResult().ok and not CheckResult(mismatches=["x"]).ok


# ==================================================== the oracle owns the numerator dim
def _medium():
    [p] = [p for p in discover(SAMPLE) if p.base == "Medium"]
    si, ei = load_air(p.starkinfo, p.expressions)
    return p, si, cover(si, ei), json.loads(p.starkinfo.read_text()), json.loads(p.expressions.read_text())


def test_sample_has_both_numerator_dims() -> None:
    """Medium pairs dim-3 denominators with dim-1 and dim-3 numerators: the mutation below bites."""
    _, _, cov, _, ei_json = _medium()
    num = reference.numerator_dims(ei_json)
    dim3 = [x.ir.exp_id for x in cov.exprs if x.ir.out_dim == 3]
    assert sorted(e for e in dim3 if num.get(e) == {1}) == sorted(x.ir.exp_id for x in cov.exprs if x.num1)
    assert any(num.get(e) == {1} for e in dim3) and any(num.get(e) == {3} for e in dim3)


def test_flipped_num1_is_detected() -> None:
    """`num1` flipped on every dim-3 expression of Medium (the kernel's own, from kernel.cover):
    the host check takes the numerator dim from the oracle, so every MUL_INV destDim 3 of those
    expressions fails (with the old check, which passed x.num1 to the oracle, this passed)."""
    p, si, cov, si_json, ei_json = _medium()
    flipped = [emit.ExprKernel(x.ir, not x.num1) if x.ir.out_dim == 3 else x for x in cov.exprs]
    ks = hostcheck.kernel_source(p.key, cov)
    ks = emit.KernelSource(ks.key, ks.q, ks.plan, flipped, ks.source_hash)
    res = _check_text(render(ks), si, si_json, ei_json, ks)
    dim3 = sorted(x.ir.exp_id for x in cov.exprs if x.ir.out_dim == 3)
    assert len(dim3) >= 4
    assert sorted(m.split(":")[0] for m in res.mismatches) == sorted(
        f"expr {e} MUL_INV destDim 3 {w}" for e in dim3 for w in ("col", "expr"))


def test_flipped_num1_in_rendered_text_is_detected() -> None:
    """The same mutation made in the rendered text of the inverse modes' kernel
    (`exps_x_inv_thread<f>(..., N, vdim, num1, ...)`, its host form `exps_x_inv_grid<f>`: num1 only
    changes MUL_INV)."""
    p, si, cov, si_json, ei_json = _medium()
    ks = hostcheck.kernel_source(p.key, cov)
    files = render(ks)
    [name] = [k for k in files if "_x" in k and not k.endswith("_xinv.cu")]
    one = [x for x in cov.exprs if x.num1][0].ir.exp_id
    [kname] = [d["kname"] for d in emit.x_parts(ks) if d["exp_id"] == str(one)]
    call = re.compile(rf"(exps_x_inv_(?:thread|grid)<{kname}>\(X, [^;]*?dest, N, 3, )1,")
    assert len(call.findall(files[name])) == 2          # device kernel and host loop
    res = _check_text({**files, name: call.sub(r"\g<1>0,", files[name])},
                      si, si_json, ei_json, ks)
    assert sorted(m.split(":")[0] for m in res.mismatches) == [f"expr {one} MUL_INV destDim 3 col",
                                                               f"expr {one} MUL_INV destDim 3 expr"]


# ============================ exps_launch_expr: every mode x destDim x vdim x numerator dim
ESI = {
    "name": "Enum", "airgroupId": 0, "airId": 0, "nStages": 2, "starkStruct": {"nBits": 3, "nBitsExt": 4},
    "cmPolsMap": [{"stage": 1, "dim": 1, "stagePos": 0}, {"stage": 1, "dim": 1, "stagePos": 1},
                  {"stage": 2, "dim": 3, "stagePos": 0}],
    "mapSectionsN": {"const": 0, "cm1": 2, "cm2": 3, "cm3": 0}, "openingPoints": [0, 1],
    "boundaries": [{"name": "everyRow"}], "nConstants": 0, "nPublics": 0, "challengesMap": [], "evMap": [],
    "cExpId": 1, "qDim": 1,
}
C2 = {"type": "cm", "id": 2, "prime": 0, "dim": 3}


def _e(exp_id: int, op: str, dim: int, a: dict, b: dict) -> dict:
    return {"expId": exp_id, "code": [{"op": op, "dest": {"type": "tmp", "id": 0, "dim": dim}, "src": [a, b]}]}


def _pair(num: int, den: int, name: str = "im_col", suffix: str = "") -> dict:
    return {"name": name, "fields": [
        {"name": "numerator" + suffix, "values": [{"op": "tmp", "id": num, "dim": 3, "pos": []}]},
        {"name": "denominator" + suffix, "values": [{"op": "tmp", "id": den, "dim": 3, "pos": []}]}]}


#: expId -> (vdim, numerator dims in hintsInfo); 9 pairs with both dims: not covered; 10's numerator
#: 11 is not covered (reads Zi) and its hint value says dim 3, but its code (the bin destDim) is dim 1
ENUM = {2: (1, {1}), 3: (1, {3}), 4: (1, set()), 5: (3, set()), 6: (3, {1}), 7: (3, {3}), 8: (3, {3}),
        9: (3, {1, 3}), 10: (3, {1}), 11: (1, set())}
ZI = {"type": "Zi", "boundaryId": 0, "dim": 1}
EEI = {"expressionsCode": [EI["expressionsCode"][0],
                           _e(2, "sub", 1, CM0, CM1), _e(3, "mul", 1, CM1, CM0), _e(4, "add", 1, CM0, CM0),
                           _e(5, "add", 3, C2, CM1), _e(6, "mul", 3, C2, CM0), _e(7, "sub", 3, CM1, C2),
                           _e(8, "mul", 3, C2, C2), _e(9, "add", 3, C2, C2), _e(10, "sub", 3, C2, C2),
                           _e(11, "mul", 1, CM0, ZI)],
       "hintsInfo": [_pair(4, 2), _pair(5, 3), _pair(2, 6, "gsum_col", "_air"), _pair(7, 7), _pair(5, 8, "gprod_col", "_direct"),
                     _pair(4, 9), _pair(8, 9), _pair(11, 10)]}


def test_launch_expr_every_shape() -> None:
    """mode x destDim x vdim x numerator dim (x col / expr dest) through the host build, each
    compared with the oracle's store; N == 0 reports success and writes nothing; only calls the
    prover cannot make return 0. (The old launcher returned 0 for destDim < vdim, for WRITE_INV
    with destDim != vdim and for N == 0: a covered expression left unwritten.)"""
    si = parse_starkinfo(ESI, "enum.starkinfo.json")
    ei = parse_expressionsinfo(EEI, "enum.expressionsinfo.json", si)
    cov = cover(si, ei)
    assert {x.ir.exp_id: (x.ir.out_dim, x.num1) for x in cov.exprs} == {
        2: (1, False), 3: (1, False), 4: (1, False), 5: (3, False), 6: (3, True), 7: (3, False), 8: (3, False),
        10: (3, True)}
    assert sorted(s.exp_id for s in cov.skipped_exprs) == [9, 11]
    assert ("denominator of numerators of both dims 1 and 3" in
            next(s.reason for s in cov.skipped_exprs if s.exp_id == 9))
    for e, (vdim, dims) in ENUM.items():
        assert reference.numerator_dims(EEI).get(e, set()) == dims
    ks = hostcheck.kernel_source("enum", cov, 0)
    with tempfile.TemporaryDirectory(prefix="exps-enum-") as d:
        lib = hostcheck._load(hostcheck.build_host_library(render(ks), Path(d)))
        res = check_kernel(si, ESI, EEI, ks, lib, seed=5)
        assert res.mismatches == []
        assert res.expr_checks == 8 * (len(hostcheck.EXPR_CASES) + 1) == 8 * 13
        assert {(m, dd) for m, dd, _ in hostcheck.EXPR_CASES} == {(m, dd) for m in (0, 1, 2) for dd in (1, 3)}
        assert res.expr_words == 8 * 24 * 64
        # calls no prover makes: unknown mode, destDim 2, an uncovered or unknown expression
        buf = np.full(3 * 64, POISON, dtype=np.uint64)
        for exp_id, mode, ddim in ((2, 3, 1), (6, 1, 2), (6, 0, 0), (9, 0, 3), (1, 0, 3), (77, 0, 1)):
            assert lib.exps_launch_expr(exp_id, None, buf.ctypes.data, 64, 64, 0, 0, 0, mode, 0, 0, 3, ddim, 0,
                                        None) == 0
        assert np.all(buf == POISON)
        assert [lib.exps_expr_covered(e) for e in range(1, 12)] == [0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0]


# ============================== real chunked Q at the tuner's chunking, in the default run
CONNECTION_NEW = PK / "connection/provingKey/connection/Connection/airs/ConnectionNew/air/ConnectionNew"
MEDIUM = SAMPLE / "synth/Basic/airs/Medium/air/Medium"


@requires("nvcc")
@pytest.mark.parametrize("which", ["ConnectionNew", "Medium"])
def test_host_check_at_the_tuners_chunking(which: str, tmp_path: Path) -> None:
    """The real autotune (build.act_ir + act_tune, probes compiled by nvcc for sm_90) chooses the
    chunking; the host check then runs that very plan (many chunks, ample and tight scratch) on a
    real key's Q (ConnectionNew, 596 ops) and on a sample AIR (Medium, 483 ops)."""
    from codegen.build.actions import act_ir, act_tune
    if which == "ConnectionNew":
        require("pk")
    base = CONNECTION_NEW if which == "ConnectionNew" else MEDIUM
    si_p, ei_p = Path(f"{base}.starkinfo.json"), Path(f"{base}.expressionsinfo.json")
    ir_json, tune_json = tmp_path / "ir.json", tmp_path / "tune.json"
    assert act_ir(which, str(si_p), str(ei_p), str(ir_json), []) is not False
    assert act_tune(which, str(ir_json), str(tune_json), str(tmp_path / "probe"), [90], None, launcher=[])
    tune = json.loads(tune_json.read_text())
    opc = tune["ops_per_chunk"]
    si, ei = load_air(si_p, ei_p)
    cov = cover(si, ei)
    assert tune["skip"] == "" and tune["probes"]
    assert cov.q_ops == {"ConnectionNew": 596, "Medium": 483}[which]
    assert 0 < opc < cov.q_ops                      # the tuner chunks both (64 ops with nvcc 13)
    ks = hostcheck.kernel_source(which, cov, opc)
    assert ks.plan.n_chunks == -(-cov.q_ops // opc) >= 2 and ks.plan.total_slots > 0
    res = check_air(which, si, json.loads(si_p.read_text()), json.loads(ei_p.read_text()), cov, ops_per_chunk=opc)
    assert res.mismatches == []
    q_words, checks, words = _expected_counts(si, cov)
    n_ext = min(max(1 << si.n_bits_ext, 1024), 1 << 13)
    assert (res.q_words, res.expr_checks, res.expr_words) == (3 * 3 * n_ext, checks, words)


@pytest.mark.parametrize("base,opc", [("Medium", 32), ("Medium", 61), ("Shared", 16)])
def test_sample_q_in_small_chunks(base: str, opc: int) -> None:
    """A sample Q cut into many small chunks (Medium: 16 and 8 chunks, Shared: 10), so that many
    values cross cuts and scratch slots are reused often: Q only, ample and tight scratch, two
    draws. A slot handed to a new value before its owner's last load, or a value read from the
    wrong slot, shows here as wrong words."""
    [p] = [p for p in discover(SAMPLE) if p.base == base and "recursive2" not in p.rel]
    si, ei = load_air(p.starkinfo, p.expressions)
    cov = cover(si, ei)
    ks = hostcheck.kernel_source(p.key, cov, opc)
    assert ks.plan.n_chunks >= 8 and ks.plan.total_slots > 0
    reused = len(ks.plan.slot_of) - ks.plan.n_slots1 - ks.plan.n_slots3
    assert reused > 0                               # more crossing values than slots: slots are reused
    si_json, ei_json = json.loads(p.starkinfo.read_text()), json.loads(p.expressions.read_text())
    with tempfile.TemporaryDirectory(prefix="exps-chunks-") as d:
        lib = hostcheck._load(hostcheck.build_host_library(render(ks), Path(d)))
        for seed in (1, 2):
            res = check_kernel(si, si_json, ei_json, ks, lib, seed=seed, q_only=True)
            assert res.mismatches == [] and res.q_words == 3 * 3 * 1024, (seed, res.mismatches)


def test_generic_inverse_kernel_runs_the_inverse_modes_of_uninverted_expressions() -> None:
    """Medium's expressions that no hint inverts have no `_ki` kernel: a MUL_INV / WRITE_INV call of
    one runs its WRITE kernel into scratch and the key's generic inverse kernel over it (the
    launcher's fallback). The host check runs those calls against the oracle like every other;
    a read one word off in the generic kernel fails exactly those calls."""
    p, si, cov, si_json, ei_json = _medium()
    ks = hostcheck.kernel_source(p.key, cov)
    cold = sorted(x.ir.exp_id for x in cov.exprs if not x.inv)
    hot = sorted(x.ir.exp_id for x in cov.exprs if x.inv)
    dens = sorted({h.denominator[1] for h in load_air(p.starkinfo, p.expressions)[1].hints
                   if h.denominator[0] == "tmp"} & {x.ir.exp_id for x in cov.exprs})
    assert hot == dens and cold and len(cold) + len(hot) == len(cov.exprs)
    files = render(ks)
    [name] = [k for k, t in files.items() if k.endswith(".cu") and "void exps_x_inv_h(" in t]
    assert name == "exps_xinv.cu"       # its own device TU (the same text in every kernel)
    good = "exps_saved_inv_thread((const uint64_t*)o1, o2, o3, blk, tx,"      # the host form's
    assert files[name].count(good) == 1
    assert _check_text(files, si, si_json, ei_json, ks).mismatches == []
    res = _check_text({**files, name: files[name].replace(good, good.replace("o1,", "o1 + 1,"))},
                      si, si_json, ei_json, ks)
    assert res.mismatches and all(("MUL_INV" in m or "WRITE_INV" in m) for m in res.mismatches)
    assert {int(m.split()[1]) for m in res.mismatches} == set(cold)


def _intermediates():
    require("pk")
    [p] = [p for p in discover(PK / "intermediate_sums" / "provingKey") if p.base == "Intermediates"]
    si, ei = load_air(p.starkinfo, p.expressions)
    return p, si, cover(si, ei), json.loads(p.starkinfo.read_text()), json.loads(p.expressions.read_text())


def test_offsets_of_a_shared_expression_kernel_are_each_expressions_own() -> None:
    """Expressions of one shape share one kernel, each with its own offsets in the launch
    table: given another expression's offsets (same kernel, other columns), one expression's every
    launch is caught, and no other expression's."""
    p, si, cov, si_json, ei_json = _intermediates()
    ks = hostcheck.kernel_source(p.key, cov)
    xs = emit.x_parts(ks)
    a, b = next((i, j) for j, d in enumerate(xs) for i in range(j) if xs[i]["of"] == d["of"] and
                xs[i]["offs"] != d["offs"])
    files = render(ks)
    abi_name = f"{p.key}_abi.cpp"
    abi = files[abi_name]
    tables = dict(re.findall(r"\{(\d+)ull, \d+, \"\w+\", [^}]*?(exps_offs_x\d+), \d+u\}", abi))
    ea, eb = xs[a]["exp_id"], xs[b]["exp_id"]
    row = re.search(rf"\{{{eb}ull, [^\n]*?{tables[eb]}, (\d+)u\}}", abi)
    assert row and len(xs[a]["offs"]) == len(xs[b]["offs"])
    wrong = abi.replace(row[0], row[0].replace(tables[eb], tables[ea]))
    res = _check_text({**files, abi_name: wrong}, si, si_json, ei_json, ks)
    assert res.mismatches and {m.split()[1] for m in res.mismatches} == {eb}, res.mismatches[:4]
