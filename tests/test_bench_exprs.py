"""bench/exprs.py (trace-domain expression benchmark): the prover's launch shapes read from the hints,
the interpreter's trace-domain entry (host build) vs the numpy oracle, and the whole script end to end
on the CPU (CuPy emulated, host builds of bench/interp.cu and of the generated kernel)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import bytecode as B  # noqa: E402
from bench import exprs as X  # noqa: E402
from bench import interp_lib as IL  # noqa: E402
from codegen.check import reference  # noqa: E402
from codegen.check.hostcheck import raw_words  # noqa: E402
from require import require  # noqa: E402

SAMPLE = REPO / "provingkey-sample"
MEDIUM = SAMPLE / "synth/Basic/airs/Medium/air/Medium"


def _load(base: Path) -> tuple[dict, dict]:
    return (json.loads(Path(f"{base}.starkinfo.json").read_text()),
            json.loads(Path(f"{base}.expressionsinfo.json").read_text()))


def _vdims(ei: dict) -> dict[int, int]:
    return {e["expId"]: e["code"][-1]["dest"]["dim"] for e in ei["expressionsCode"] if e.get("code")}


def test_prover_cases_of_the_sample() -> None:
    """Medium has every hint shape: im_col with dim-1 / dim-3 / number / cm numerators, an imPol,
    gsum_col (expression) and gprod_col (numerator over the number 1)."""
    si, ei = _load(MEDIUM)
    got = {e: sorted((X.MODE_NAMES[c.mode], c.dest_expr, c.dest_dim, c.stage_pos, c.scalar) for c in cs)
           for e, cs in X.prover_cases(si, ei, _vdims(ei)).items()}
    p_minus_1 = 18446744069414584320
    assert got == {
        125: [("WRITE", False, 3, 21, 0)],                                  # imPol column
        37: [("WRITE", False, 3, 6, 0)], 42: [("MUL_INV", False, 3, 6, 0)],  # im_col, dim-1 numerator
        47: [("WRITE", False, 3, 9, 0)], 61: [("MUL_INV", False, 3, 9, 0)],
        68: [("WRITE_INV", False, 3, 12, p_minus_1)],                        # number numerator
        82: [("WRITE", False, 3, 15, 0)], 99: [("MUL_INV", False, 3, 15, 0)],
        136: [("WRITE", True, 3, 0, 0)],                                     # gsum_col expression
        141: [("WRITE", True, 3, 0, 0)],                                     # gprod_col, denominator 1
    }                                                                        # 120: cm numerator -> interpreter
    cs = X.cases_of(136, 3, X.prover_cases(si, ei, _vdims(ei)))
    assert [(c.label, c.uses) for c in cs] == [("WRITE expr dim3", ["generic", "gsum_col expression"])]
    assert [c.label for c in X.cases_of(42, 3, X.prover_cases(si, ei, _vdims(ei)))] == \
        ["WRITE expr dim3", "MUL_INV col dim3"]


def test_floor_and_summary() -> None:
    assert X.floor_ms(5, 6, 1 << 22, 4000) == pytest.approx(11 * 8 * (1 << 22) / 4e12 * 1e3)
    assert X.Case(X.MUL_INV, False, 3).words_per_row() == 6
    assert X.Case(X.WRITE_INV, True, 1).words_per_row() == 1
    r = {"air": "k/A", "rows": 22, "exprs_covered": 2, "status": "ok", "cases": [
        {"exp_id": 1, "label": "WRITE expr dim1", "uses": ["generic"], "gen_ms": 1.0, "interp_ms": 3.0,
         "floor_ms": 0.5},
        {"exp_id": 1, "label": "WRITE col dim3", "uses": ["imPol"], "gen_ms": 1.0, "interp_ms": 5.0,
         "floor_ms": 0.5}]}
    X.summarize(r)
    assert (r["exprs_timed"], r["launches_timed"], r["gen_ms"], r["speedup"], r["floor_over_gen"]) == \
        (1, 2, 2.0, 4.0, 0.5)
    assert (r["prover_launches"], r["prover_interp_ms"]) == (1, 5.0)
    assert "| k/A | 2^22 | 1/2 | 2 | 2.000 | 8.000 | 1.000 | 50% | 4.00x | yes |" in \
        X.markdown_table(X.TABLE_HEAD, X.table_rows([r]))
    assert X.median_floor([r, {"floor_over_gen": 0.25}]) == pytest.approx(0.375)


@pytest.fixture(scope="module")
def host_lib(tmp_path_factory):
    require("gxx")
    return IL.load_host(IL.build_host(tmp_path_factory.mktemp("interp") / "libinterp_host.so"))


def test_interpreter_expr_entry_vs_oracle(host_lib) -> None:
    """interp_host_expr_run: every covered-like expression of Medium, every mode x destination x
    destDim, on raw words with edges, equal to reference.eval_expression + reference.store."""
    si, ei = _load(MEDIUM)
    n = 256
    lay = IL.TraceLayout.of(si, n)
    rng = np.random.default_rng(5)
    aux = raw_words(rng, (lay.aux_elems,))
    const = raw_words(rng, (lay.n_const * n,))
    sc = {k: raw_words(rng, (v,)) for k, v in lay.scalar_sizes.items()}
    dd = lay.domain(aux, const, sc)
    bcs, _, refused = B.compile_bin(si, ei, copy="mul1")
    assert refused == {}
    checked = 0
    for e in ei["expressionsCode"]:
        if e["expId"] == si["cExpId"]:
            continue
        bc = bcs[e["expId"]]
        try:
            B.check_runnable(si, bc)      # the FRI expression (xDivXSubXi) is not a trace-domain one
        except B.BytecodeError:
            continue
        num_dim = reference.mul_inv_numerator_dim(ei, e["expId"])
        v = reference.eval_expression(si, e, dd, False)
        for mode in (X.WRITE, X.MUL_INV, X.WRITE_INV):
            for dest_dim in (1, 3):
                for dest_expr, stage_pos in ((True, 0), (False, 2)):
                    dest = raw_words(rng, (IL.dest_words(n, dest_dim, dest_expr, stage_pos),))
                    scalar = int(raw_words(rng, ()))
                    got = IL.host_expr(host_lib, si, bc, lay, aux, const, sc, dest, mode, dest_dim, dest_expr,
                                       stage_pos, scalar, num1=bc.out_dim == 3 and num_dim == 1)
                    want = reference.store(mode, v, IL.dest_view(dest, n, dest_dim, dest_expr, stage_pos),
                                           scalar, num_dim)
                    assert np.array_equal(IL.dest_view(got, n, dest_dim, dest_expr, stage_pos), want), \
                        (e["expId"], mode, dest_dim, dest_expr)
                    if not dest_expr:   # the columns before stagePos are untouched
                        assert np.array_equal(got[: stage_pos * n], dest[: stage_pos * n])
                    checked += 1
    assert checked == 14 * 12
    with pytest.raises(RuntimeError, match="store mode"):
        IL.host_expr(host_lib, si, bcs[3], lay, aux, const, sc, np.zeros(2 * n, np.uint64), 0, 2, True)


def _run_cpu(tmp_path: Path, *extra: str) -> tuple[int, dict]:
    from bench import cpu_emulation
    out = tmp_path / "out"
    rc = cpu_emulation.main(["exprs", "--pk", str(SAMPLE), "--rows", "9", "--out", str(out), "--reps", "2",
                             "--warmup", "1", "--oracle-rows", "8", "--bandwidth-mib", "16", *extra])
    return rc, json.loads((out / "exprs.json").read_text())


def test_exprs_py_end_to_end_on_cpu(tmp_path) -> None:
    """bench/exprs.py on the sample's Medium and Tiny, CuPy emulated: every covered expression is in
    exprs.json with a positive floor, generated == interpreter on all rows and == oracle at 2^8."""
    require("gxx")
    rc, d = _run_cpu(tmp_path, "--air", "Medium", "--air", "Tiny")
    assert rc == 0
    by = {r["air"]: r for r in d["results"]}
    assert sorted(by) == ["provingkey-sample/Medium", "provingkey-sample/Tiny"]
    for name, want_ids in (("provingkey-sample/Medium", {3, 10, 24, 37, 42, 47, 61, 68, 82, 99, 120, 125, 136, 141}),
                           ("provingkey-sample/Tiny", None)):
        r = by[name]
        assert r["status"] == "ok" and r["errors"] == [] and r["n"] == 512, r.get("errors")
        assert r["gen_ms"] > 0 and r["interp_ms"] > 0 and r["floor_ms"] > 0
        ids = {c["exp_id"] for c in r["cases"]}
        assert ids == set(r["covered_ids"]) and r["exprs_timed"] == r["exprs_covered"] == len(ids) > 0
        if want_ids is not None:
            assert ids == want_ids
        for c in r["cases"]:
            assert c["identical"] and c["oracle_ok"] and c["floor_ms"] > 0 and c["gen_ms"] > 0, c
    kinds = {c["label"] for c in by["provingkey-sample/Medium"]["cases"]}
    assert kinds == {"WRITE expr dim1", "WRITE expr dim3", "WRITE col dim3", "MUL_INV col dim3",
                     "WRITE_INV col dim3"}
    md = (tmp_path / "out" / "exprs.md").read_text()
    assert "| provingkey-sample/Medium | 2^9 | 14/14 | 22 |" in md and "median % of floor" in md
    assert d["meta"]["command"].startswith("python3 bench/exprs.py --pk")


def test_exprs_py_reports_a_mismatch(tmp_path, monkeypatch) -> None:
    """An interpreter that stores the wrong numerator dim must make the run fail (exit 1)."""
    require("gxx")
    orig = X.ExprInterp.launch

    def wrong(self, bc, steps, dest, scratch, n, offs, c, num1):
        return orig(self, bc, steps, dest, scratch, n, offs, c, not num1)
    monkeypatch.setattr(X.ExprInterp, "launch", wrong)
    rc, d = _run_cpu(tmp_path, "--air", "Medium")
    assert rc == 1
    r = d["results"][0]
    assert r["status"] == "MISMATCH"
    bad = {c["exp_id"] for c in r["cases"] if not c["identical"]}
    assert bad and bad <= {42, 61, 99}                    # the MUL_INV denominators


def test_exprs_py_budget(tmp_path) -> None:
    """--budget-s 0: nothing is launched, every AIR is listed as not run, no failure."""
    require("gxx")
    rc, d = _run_cpu(tmp_path, "--air", "Tiny", "--budget-s", "0")
    assert rc == 0
    assert [r["status"] for r in d["results"]] == ["not run (time budget 0 s spent)"]
