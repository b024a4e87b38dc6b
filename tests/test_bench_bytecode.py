"""bench/: the bytecode encoder vs every real `.bin`, the interpreter (its host build) vs the numpy
oracle, the nvcc build of bench/interp.cu, and bench/run.py end to end on the CPU (CuPy emulated)."""

from __future__ import annotations

import json
from pathlib import Path
import sys

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import bytecode as B  # noqa: E402
from bench import interp_lib as IL  # noqa: E402
from codegen.check import reference  # noqa: E402
from codegen.check.binfile import read_bin  # noqa: E402
from codegen.check.hostcheck import EDGE, raw_words  # noqa: E402
from require import pk_params, require  # noqa: E402

PK = REPO.parent / "shared" / "pk"
SAMPLE = REPO / "provingkey-sample"
REAL = sorted(PK.glob("**/*.starkinfo.json")) if PK.is_dir() else []
SYNTH = sorted(SAMPLE.glob("**/*.starkinfo.json"))


def _ids(p: Path) -> str:
    s = str(p)
    return s.split("/provingKey/")[-1].split("/")[-1].replace(".starkinfo.json", "") if "/provingKey/" in s \
        else "sample-" + str(p.relative_to(SAMPLE)).replace(".starkinfo.json", "").replace("/", "_")


def _load(sipath: Path) -> tuple[dict, dict]:
    si = json.loads(sipath.read_text())
    ei = json.loads(Path(str(sipath).replace(".starkinfo.json", ".expressionsinfo.json")).read_text())
    return si, ei


# ------------------------------------------------------------------------- encoder vs the .bin
def test_pk_present_or_skip() -> None:
    require("pk")
    assert REAL


@pytest.mark.parametrize("sipath", pk_params(REAL), ids=_ids)
def test_bin_reproduced_exactly(sipath: Path) -> None:
    """ops kinds, all 8 args per op (slots included), numbers[], nTemp1/3, destDim/destId."""
    si, ei = _load(sipath)
    bf = read_bin(str(sipath)[: -len(".starkinfo.json")] + ".bin")
    bcs, numbers, refused = B.compile_bin(si, ei)
    assert refused == {}
    assert tuple(numbers) == bf.numbers
    assert set(bcs) == set(bf.expressions)
    for exp_id, bc in bcs.items():
        be = bf.expressions[exp_id]
        assert tuple(bc.ops) == be.op_kinds, exp_id
        assert tuple(bc.args) == be.args, exp_id
        assert (bc.n_temp1, bc.n_temp3, bc.dest_dim, bc.dest_id) == \
               (be.n_temp1, be.n_temp3, be.dest_dim, be.dest_id), exp_id
        code = B.prepared_code(si, B.find_expression(ei, exp_id), None, "raise")
        assert B.slot_errors(code, bc) == [], exp_id


@pytest.mark.parametrize("sipath", pk_params(REAL) + SYNTH, ids=_ids)
def test_slot_allocation_valid(sipath: Path) -> None:
    si, ei = _load(sipath)
    for expr in ei["expressionsCode"]:
        try:
            bc = B.compile_expression(si, expr)
        except B.BytecodeError:
            continue
        assert B.slot_errors(B.prepared_code(si, expr, None, "raise"), bc) == [], expr["expId"]


def test_q_last_op_rewritten_to_fresh_tmp() -> None:
    si, ei = _load(SYNTH[0])
    q = B.find_expression(ei, si["cExpId"])
    assert q["code"][-1]["dest"]["type"] == "q"
    bc = B.q_bytecode(si, ei)
    assert bc.dest_dim == q["code"][-1]["dest"]["dim"] == bc.out_dim == 3
    assert bc.args[8 * (bc.n_ops - 1) + 1] == 3 * bc.dest_id
    assert bc.tmp_slot3[q["tmpUsed"]] == bc.dest_id
    with pytest.raises(B.BytecodeError):          # without the rewrite: a q destination
        B.compile_expression(si, q, rewrite_last=False)


def test_pack_segments() -> None:
    # segments touching at one op share (in-place); overlapping ones do not
    assert B.pack_segments([(0, 2, 0), (2, 4, 1), (4, 6, 2)]) == {0: 0, 1: 0, 2: 0}
    assert B.pack_segments([(0, 3, 0), (1, 4, 1), (5, 7, 2)]) == {0: 0, 1: 1, 2: 1}
    # closest fit (not first fit): tmp 2 starts at 6 and goes after the slot whose last segment
    # ends at 5 (slot 1), not the one ending at 2 (slot 0)
    assert B.pack_segments([(0, 5, 0), (1, 2, 1), (6, 7, 2)]) == {1: 0, 0: 1, 2: 1}
    assert B.pack_segments([]) == {}


def _cm_si(n_custom: int = 0) -> dict:
    return {"nStages": 2, "openingPoints": [-1, 0, 1], "customCommits": [{}] * n_custom,
            "cmPolsMap": [{"stage": 1, "stagePos": 4, "dim": 1}, {"stage": 2, "stagePos": 3, "dim": 3}],
            "airValuesMap": [{"stage": 1}, {"stage": 2}, {"stage": 1}],
            "airgroupValuesMap": [{"stage": 2}], "proofValuesMap": [], "cExpId": 99}


def _step(op, dest, a, b) -> dict:
    return {"op": op, "dest": dest, "src": [a, b]}


def test_encoding_of_operands_and_swap() -> None:
    si = _cm_si(n_custom=1)
    base = B.buffer_commit_size(si)
    assert base == 7
    t1 = {"type": "tmp", "id": 0, "dim": 1}
    t3 = {"type": "tmp", "id": 1, "dim": 3}
    cm1 = {"type": "cm", "id": 0, "dim": 1, "prime": 1}
    cm3 = {"type": "cm", "id": 1, "dim": 3, "prime": -1}
    num = {"type": "number", "value": "18446744069414584320", "dim": 1}
    ch = {"type": "challenge", "id": 2, "dim": 3}
    av = {"type": "airvalue", "id": 2, "dim": 1}
    agv = {"type": "airgroupvalue", "id": 1, "dim": 3}     # past the end of the map: position 3
    expr = {"expId": 5, "code": [
        _step("sub", t1, num, cm1),                         # rank(number) 3 > rank(cm1) 0: swap
        _step("sub", t3, t1, cm3),                          # dims differ: swap -> 3x1 sub_swap
        _step("add", {"type": "tmp", "id": 2, "dim": 3}, ch, t3),   # rank 11 > 7: swap
        _step("mul", {"type": "tmp", "id": 3, "dim": 3}, {"type": "tmp", "id": 2, "dim": 3}, av),
        _step("add", {"type": "tmp", "id": 4, "dim": 3}, {"type": "tmp", "id": 3, "dim": 3}, agv),
    ]}
    bc = B.compile_expression(si, expr)
    assert bc.ops == [0, 1, 2, 1, 2]
    ops = [bc.op(k)[1] for k in range(5)]
    assert ops[0] == (3, 0, 1, 4, 2, base + 3, 0, 0)
    assert ops[1][0] == 3 and ops[1][2:5] == (2, 3, 0) and ops[1][5:] == (base, 0, 0)
    assert ops[2][0] == 0 and ops[2][2] == base + 1 and ops[2][5:] == (base + 7, 6, 0)
    assert ops[3][0] == 2 and ops[3][5:] == (base + 4, 4, 0)          # airvalue 2: 1 + 3
    assert ops[4][5:] == (base + 6, 3, 0)
    assert bc.numbers == [18446744069414584320]
    assert bc.muls_per_row() == 3


def test_copy_and_unknown_operands() -> None:
    si = _cm_si()
    t1 = {"type": "tmp", "id": 0, "dim": 1}
    cm1 = {"type": "cm", "id": 0, "dim": 1, "prime": 0}
    expr = {"expId": 1, "code": [{"op": "copy", "dest": t1, "src": [cm1]},
                                 _step("add", {"type": "tmp", "id": 1, "dim": 1}, t1, cm1)]}
    with pytest.raises(B.BytecodeError, match="copy"):
        B.compile_expression(si, expr)
    bc = B.compile_expression(si, expr, copy="mul1")
    assert bc.op(0) == (0, (2, 0, 1, 4, 1, B.buffer_commit_size(si) + 3, 0, 0)) and bc.numbers == [1]
    bad = {"expId": 2, "code": [_step("add", t1, {"type": "x", "dim": 1}, cm1)]}
    with pytest.raises(B.BytecodeError):
        B.compile_expression(si, bad)
    with pytest.raises(B.BytecodeError, match="openingPoints"):
        B.compile_expression(si, {"expId": 3, "code": [_step("add", t1, dict(cm1, prime=5), cm1)]})


# anchors-h200.md: muls/row and the floor's distinct columns (floor_ms * BW / (8 NExt) - 3)
ANCHORS = {"Intermediates": (1134, 197), "Connection1": (190, 21), "ConnectionNew": (1183, 106),
           "FibonacciSquare": (76, 14), "SpecifiedRanges": (375, 75), "U16Air": (30, 10)}


def test_muls_and_columns_match_the_anchors() -> None:
    hits = {p.name.split(".")[0]: p for p in REAL if p.name.split(".")[0] in ANCHORS}
    require("pk")
    for name, p in hits.items():
        si, ei = _load(p)
        bc = B.q_bytecode(si, ei)
        assert (bc.muls_per_row(), len(B.distinct_columns(si, bc))) == ANCHORS[name], name


# --------------------------------------------------------------- interpreter (host build) vs oracle
@pytest.fixture(scope="session")
def host_lib(tmp_path_factory):
    require("gxx")
    return IL.load_host(IL.build_host(tmp_path_factory.mktemp("interp") / "libinterp_host.so"))


def _inputs(si: dict, n: int, seed: int):
    lay = IL.QLayout.of(si, n)
    rng = np.random.default_rng(seed)
    aux = raw_words(rng, (lay.aux_elems,))
    const = raw_words(rng, (lay.n_const * n,))
    sc = {k: raw_words(rng, (v,)) for k, v in lay.scalar_sizes.items()}
    dd = reference.DomainData(
        n, {s: aux[lay.off_cm[s]: lay.off_cm[s] + c * n].reshape(c, n) for s, c in lay.cols.items()},
        const.reshape(-1, n) if lay.n_const else np.zeros((0, n), np.uint64),
        aux[lay.off_zi: lay.off_zi + n], sc["publicInputs"], sc["challenges"], sc["airValues"],
        sc["airgroupValues"], sc["proofValues"], sc["evals"])
    return lay, aux, const, sc, dd


@pytest.mark.parametrize("sipath", pk_params(REAL) + SYNTH, ids=_ids)
def test_interpreter_bit_identical_to_oracle(sipath: Path, host_lib) -> None:
    si, ei = _load(sipath)
    try:
        bc = B.q_bytecode(si, ei)
    except B.BytecodeError as e:
        assert "Zi boundary" in str(e)          # the sample's Skipped AIR (firstRow)
        return
    cases = [(1024, 512, None), (64, 512, None), (2048, 3, None), (1024, 512, "tight")]
    if bc.n_ops > 2000:
        cases = cases[:1] + cases[3:]
    for n, blocks, scratch in cases:
        lay, aux, const, sc, dd = _inputs(si, n, seed=n + blocks)
        want = reference.eval_q(si, ei, dd)
        elems = host_lib.interp_scratch_per_block(n, bc.n_temp1, bc.n_temp3) if scratch else None
        got = IL.host_q(host_lib, si, bc, lay, aux, const, sc, n_blocks=blocks, scratch_elems=elems)
        assert np.array_equal(got, want), (n, blocks, scratch, int(np.count_nonzero(got != want)))


def test_interpreter_refuses_bad_arguments(host_lib) -> None:
    si, ei = _load(SYNTH[0])
    bc = B.q_bytecode(si, ei)
    lay, aux, const, sc, _ = _inputs(si, 256, 1)
    with pytest.raises(RuntimeError, match="scratch too small"):
        IL.host_q(host_lib, si, bc, lay, aux, const, sc, scratch_elems=1)
    lay_bad = IL.QLayout.of(si, 256)
    lay_bad.n_ext = 300
    with pytest.raises(RuntimeError, match="power of two"):
        IL.host_q(host_lib, si, bc, lay_bad, aux, const, sc)


# ------------------------------------------------------------------------------ nvcc build
@pytest.mark.nvcc
def test_interp_cu_compiles_without_warnings(tmp_path) -> None:
    require("nvcc")
    so, text = IL.build_gpu(tmp_path / "libinterp.so", "90", force=True, strict=True)
    assert so.is_file()
    regs = IL.ptxas_registers(text)
    assert regs is not None and regs <= 255
    assert "0 bytes spill stores" in text


# --------------------------------------------------------------------- run.py on the CPU
def test_run_helpers() -> None:
    from bench import run as R
    assert tuple(int(x) for x in EDGE) == R.EDGE
    assert abs(R.floor_ms(197, 1 << 22, 4229) - 1.587) < 0.002     # anchors: Intermediates
    info = R.kernel_info(None, "k", 0)
    assert info.chunks_slots() == "1/0"
    assert R.kernel_info(None, "k", 18 * 256).chunks_slots() == "?/18"
    r = {"air": "a/B", "ops": 3, "chunks_slots": "1/0", "regs": "40", "gen_ms": 1.0, "interp_ms": 2.5,
         "interp_smem_ms": None, "floor_ms": 0.25, "n_ext": 1 << 22, "muls_per_row": 30, "gmul_s": 125.8,
         "identical": True, "status": "ok"}
    md = R.markdown_table([r, {"air": "c/D", "status": "no bytecode: x"}])
    assert "| a/B | 3 | 1/0 | 40 | 1.000 | 2.500 | 2.50x | = | 0.250 | 25% | 0.24 | 30 | 126 | yes |" in md
    assert "no bytecode: x" in md


def test_kernel_info_from_build_dir(tmp_path) -> None:
    from bench import run as R
    kd = tmp_path / "key1"
    kd.mkdir()
    (kd / "manifest.json").write_text(json.dumps({"format": 1, "plan": {"chunks": 3, "slots": 9}}))
    rep = {"sm_90": {"registers": 72}}
    (kd / "objs.json").write_text(json.dumps({"format": 1, "reports": {"a.cu": {
        "_Z9key1_q_c0_kPK11StepsParams": rep, "_Z9key1_q_c2_kPK11StepsParams": {"sm_90": {"registers": 80}},
        "_Z9key1_q_c1_kPK11StepsParams": {"sm_90": {"registers": 64}}, "other": rep}}}))
    info = R.kernel_info(tmp_path, "key1", 9 * 256)
    assert (info.chunks_slots(), info.regs, info.regs_text()) == ("3/9", [72, 64, 80], "72,64,80")
    # a chunk the build bounded (objs.json "bounded") runs its twin: the twin's registers count
    objs = json.loads((kd / "objs.json").read_text())
    objs.update({"bounded": {"2": 3}, "twin_reports": {"a.cu": {
        "_Z10key1_q_c2_kbPK11StepsParams": {"sm_90": {"registers": 78}},
        "_Z10key1_q_c0_kbPK11StepsParams": {"sm_90": {"registers": 60}}}}})
    (kd / "objs.json").write_text(json.dumps(objs))
    assert R.kernel_info(tmp_path, "key1", 9 * 256).regs == [72, 64, 78]


def test_run_py_end_to_end_on_cpu(tmp_path) -> None:
    """bench/run.py with CuPy emulated on the host and host builds of both libraries."""
    require("gxx")
    from bench import cpu_emulation
    out = tmp_path / "out"
    rc = cpu_emulation.main(["--pk", str(SAMPLE), "--rows", "9", "--out", str(out), "--reps", "2",
                             "--warmup", "1", "--oracle-rows", "8", "--air", "Tiny", "--air", "Shared",
                             "--bandwidth-mib", "16"])
    assert rc == 0
    d = json.loads((out / "bench.json").read_text())
    names = sorted(r["air"] for r in d["results"])
    assert names == ["provingkey-sample/Shared", "provingkey-sample/Tiny"]
    for r in d["results"]:
        assert r["status"] == "ok" and r["identical"] and r["n_ext"] == 512 and r["errors"] == []
    assert "| provingkey-sample/Tiny | 39 |" in (out / "bench.md").read_text()
