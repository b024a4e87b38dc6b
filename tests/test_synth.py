"""Synthetic provingKeys (codegen/synth.py) and the committed provingkey-sample/."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codegen.sample import synth

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "provingkey-sample"
P = 0xFFFF_FFFF_0000_0001


def _files(root: Path) -> dict[str, bytes]:
    """What synth writes: the JSON files and the README (not build products such as .exps.so)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and (p.name.endswith(".json") or p == root / "README.md")}


def _airs(root: Path) -> dict[str, tuple[dict, dict]]:
    """rel air dir -> (starkinfo, expressionsinfo), read back from disk."""
    out = {}
    for si_path in sorted(root.rglob("*.starkinfo.json")):
        base = si_path.name[: -len(".starkinfo.json")]
        ex = si_path.with_name(base + ".expressionsinfo.json")
        out[str(si_path.parent.relative_to(root))] = (json.loads(si_path.read_text()),
                                                      json.loads(ex.read_text()))
    return out


def _q(si: dict, ei: dict) -> dict:
    return next(e for e in ei["expressionsCode"] if e["expId"] == si["cExpId"])


def _srcs(e: dict):
    for o in e["code"]:
        yield from o["src"]


@pytest.fixture(scope="module")
def sample() -> dict[str, tuple[dict, dict]]:
    return _airs(SAMPLE)


def _by_name(sample, name: str) -> tuple[dict, dict]:
    hits = [v for k, v in sample.items() if f"/airs/{name}/" in k + "/"]
    assert len(hits) >= 1, name
    return hits[0]


# ------------------------------------------------------------------------------ determinism
def test_build_is_deterministic(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    synth.build_sample(a)
    synth.build_sample(b)
    fa, fb = _files(a), _files(b)
    assert fa and fa == fb


def test_build_is_deterministic_across_hash_seeds(tmp_path):
    outs = []
    for seed in ("1", "12345"):
        out = tmp_path / f"s{seed}"
        subprocess.run([sys.executable, "-m", "codegen.sample.synth", str(out)], cwd=ROOT, check=True,
                       env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}, capture_output=True)
        outs.append(_files(out))
    assert outs[0] == outs[1]


def test_committed_sample_equals_fresh_build(tmp_path):
    synth.build_sample(tmp_path)
    fresh, committed = _files(tmp_path), _files(SAMPLE)
    assert sorted(committed) == sorted(fresh), "provingkey-sample/ has other files than a fresh build"
    stale = [k for k in fresh if fresh[k] != committed[k]]
    assert not stale, f"regenerate with `python -m codegen.sample.synth provingkey-sample`: {stale}"


def test_sample_size():
    assert sum(len(v) for v in _files(SAMPLE).values()) < 3 * 1024 * 1024


# ------------------------------------------------------------------------------- structure
def _check_ssa(code: list[dict], where: str) -> None:
    written: dict[int, int] = {}
    for k, o in enumerate(code):
        assert o["op"] in ("add", "sub", "mul") and len(o["src"]) == 2, (where, k)
        for s in o["src"]:
            if s["type"] == "tmp":
                assert s["id"] in written, f"{where}[{k}]: tmp {s['id']} used before defined"
                assert written[s["id"]] == s["dim"], (where, k)
        d = o["dest"]
        if d["type"] == "tmp":
            assert d["id"] not in written, f"{where}[{k}]: tmp {d['id']} written twice"
            assert d["dim"] == max(s.get("dim", 1) for s in o["src"]), (where, k)
            written[d["id"]] = d["dim"]
        else:
            assert d["type"] == "q" and k == len(code) - 1, (where, k)


def test_sample_air_list(sample):
    names = sorted(sample)
    assert names == sorted([
        "synth/Basic/airs/Tiny/air", "synth/Basic/airs/Medium/air", "synth/Basic/airs/Large/air",
        "synth/Basic/airs/Skipped/air", "synth/Rec/airs/Shared/recursive1",
        "synth/Rec/airs/Shared/recursive2"])


def test_every_tmp_written_once_and_defined_before_use(sample):
    for rel, (si, ei) in sample.items():
        for e in ei["expressionsCode"]:
            _check_ssa(e["code"], f"{rel} expId {e['expId']}")
            ids = [o["dest"]["id"] for o in e["code"] if o["dest"]["type"] == "tmp"]
            assert e["tmpUsed"] == max(ids) + 1
        for k, c in enumerate(ei["constraints"]):
            _check_ssa(c["code"], f"{rel} constraint {k}")


def test_validate_and_layout(sample):
    for rel, (si, ei) in sample.items():
        synth.validate(si, ei)
        pos: dict[int, int] = {}
        for c in si["cmPolsMap"]:
            assert c["stagePos"] == pos.get(c["stage"], 0), rel
            pos[c["stage"]] = c["stagePos"] + c["dim"]
        assert {k: v for k, v in si["mapSectionsN"].items() if k != "const"} == \
            {f"cm{s}": pos.get(s, 0) for s in (1, 2, 3)}
        assert pos[3] == 3 * si["qDeg"]
        assert si["openingPoints"] == sorted(si["openingPoints"])
        assert [c["name"] for c in si["challengesMap"]] == \
            ["std_alpha", "std_gamma", "std_vc", "std_xi", "std_vf1", "std_vf2"]
        assert si["friExpId"] == si["cExpId"] + 1
        exp_ids = [e["expId"] for e in ei["expressionsCode"]]
        assert exp_ids[-2:] == [si["cExpId"], si["friExpId"]]
        assert exp_ids[:-2] == sorted(exp_ids[:-2])


def test_q_shape(sample):
    for rel, (si, ei) in sample.items():
        q = _q(si, ei)
        assert q["stage"] == si["nStages"] + 1 == 3
        last = q["code"][-1]
        assert last["op"] == "mul" and last["dest"] == {"type": "q", "id": 0, "dim": si["qDim"]}
        assert last["src"][1] == {"type": "Zi", "boundaryId": 0, "dim": 1}
        types = {s["type"] for s in _srcs(q)}
        assert not types & {"eval", "xDivXSubXi", "proofvalue"}, rel
        vc = [o for o in q["code"] if any(s["type"] == "challenge" and s["id"] == synth.VC
                                          for s in o["src"])]
        assert len(vc) == len(ei["constraints"]) - 1      # Horner over the constraints
        fri = next(e for e in ei["expressionsCode"] if e["expId"] == si["friExpId"])
        ftypes = {s["type"] for s in _srcs(fri)}
        assert {"eval", "xDivXSubXi"} <= ftypes
        assert max(s["id"] for s in _srcs(fri) if s["type"] == "eval") == len(si["evMap"]) - 1


def test_sizes(sample):
    assert len(_q(*_by_name(sample, "Tiny"))["code"]) < 64
    assert _by_name(sample, "Tiny")[0]["starkStruct"]["nBits"] == 4
    assert 300 <= len(_q(*_by_name(sample, "Medium"))["code"]) <= 800
    assert _by_name(sample, "Medium")[0]["starkStruct"]["nBits"] == 6
    assert len(_q(*_by_name(sample, "Large"))["code"]) >= 5000
    assert _by_name(sample, "Large")[0]["starkStruct"]["nBits"] == 5


def test_large_has_long_live_ranges(sample):
    q = _q(*_by_name(sample, "Large"))
    first, last = {}, {}
    for k, o in enumerate(q["code"]):
        for s in o["src"]:
            if s["type"] == "tmp":
                last[s["id"]] = k
        first[o["dest"]["id"]] = k
    long = [t for t in last if last[t] - first[t] > 1000]
    assert len(long) >= 50


def test_medium_features(sample):
    si, ei = _by_name(sample, "Medium")
    by_id = {e["expId"]: e for e in ei["expressionsCode"]}
    trace = [e for e in ei["expressionsCode"] if e["expId"] not in (si["cExpId"], si["friExpId"])]
    assert len(trace) >= 10
    assert all(0 < len(e["code"]) <= 512 for e in trace)

    def fields(h):
        return {f["name"]: f["values"] for f in h["fields"]}

    ims = [fields(h) for h in ei["hintsInfo"] if h["name"] == "im_col"]
    kinds = set()
    for f in ims:
        num, den = f["numerator"][0], f["denominator"][0]
        assert den["op"] == "tmp" and by_id[den["id"]]["code"][-1]["dest"]["dim"] == 3
        kinds.add(num["op"] if num["op"] != "tmp" else f"tmp{by_id[num['id']]['code'][-1]['dest']['dim']}")
    assert {"tmp1", "tmp3", "number"} <= kinds
    gprod = [fields(h) for h in ei["hintsInfo"] if h["name"] == "gprod_col"]
    assert gprod and gprod[0]["denominator"][0] == {"op": "number", "value": "1", "pos": []}
    assert gprod[0]["numerator"][0]["op"] == "tmp"
    assert any(h["name"] == "gsum_col" for h in ei["hintsInfo"])
    assert any(h["name"] == "gsum_member_data" for h in ei["hintsInfo"])
    assert any(c.get("imPol") for c in si["cmPolsMap"])
    assert any("dest" in e for e in trace)
    # stage-2 dim-3 columns, airvalues of both stages, publics, proofvalues, challenges
    assert any(c["stage"] == 2 and c["dim"] == 3 for c in si["cmPolsMap"])
    assert {a["stage"] for a in si["airValuesMap"]} == {1, 2}
    types = {(s["type"], s.get("dim")) for e in ei["expressionsCode"] for s in _srcs(e)}
    for t in (("public", 1), ("airvalue", 1), ("airvalue", 3), ("airgroupvalue", 3),
              ("proofvalue", 1), ("proofvalue", 3), ("challenge", 3), ("cm", 3), ("const", 1)):
        assert t in types, t
    q = _q(si, ei)
    assert {s["prime"] for s in _srcs(q) if s["type"] in ("cm", "const")} == {-1, 0, 1}
    assert "eval" not in {s["type"] for s in _srcs(q)}


def test_numbers(sample):
    vals = {s["value"] for _, ei in sample.values() for e in ei["expressionsCode"]
            for s in _srcs(e) if s["type"] == "number"}
    assert {"0", "1", str(P - 1)} <= vals
    assert any(2 <= int(v) <= 16 for v in vals)
    assert any(1 << 32 < int(v) < P - 1 for v in vals)
    assert all(isinstance(v, str) and 0 <= int(v) < 1 << 64 for v in vals)


def test_shared_pair(sample):
    r1 = sample["synth/Rec/airs/Shared/recursive1"]
    r2 = sample["synth/Rec/airs/Shared/recursive2"]
    b1 = (SAMPLE / "synth/Rec/airs/Shared/recursive1/Shared.expressionsinfo.json").read_bytes()
    b2 = (SAMPLE / "synth/Rec/airs/Shared/recursive2/Shared.expressionsinfo.json").read_bytes()
    assert b1 == b2

    def ident(si):
        return si["airgroupId"], si["airId"], si["starkStruct"]["nBits"], si["cExpId"]

    assert ident(r1[0]) == ident(r2[0])
    s1 = synth.sym_of("synth/Rec/airs/Shared/recursive1", r1[0])
    assert s1 == synth.sym_of("synth/Rec/airs/Shared/recursive2", r2[0])
    assert s1.startswith("recursive_a1_0_b5_e")


def test_distinct_air_ids(sample):
    ids = {}
    for rel, (si, _) in sample.items():
        ids.setdefault((si["airgroupId"], si["airId"]), set()).add(rel.split("/airs/")[1].split("/")[0])
    assert all(len(v) == 1 for v in ids.values())
    assert len(ids) == 5


def test_skipped_uses_zi_boundary_1(sample):
    si, ei = _by_name(sample, "Skipped")
    assert [b["name"] for b in si["boundaries"]] == ["everyRow", "firstRow"]
    assert any(s["type"] == "Zi" and s["boundaryId"] == 1 for s in _srcs(_q(si, ei)))
    assert any(c["boundary"] == "firstRow" for c in ei["constraints"])
    for rel, (si2, ei2) in sample.items():
        if "/Skipped/" not in rel + "/":
            assert len(si2["boundaries"]) == 1
            assert all(s["boundaryId"] == 0 for s in _srcs(_q(si2, ei2)) if s["type"] == "Zi")


def test_swap_rule_is_exercised(sample):
    swapped = kept = mixed13 = mixed31 = 0
    for _, ei in sample.values():
        for e in ei["expressionsCode"]:
            for o in e["code"]:
                a, b = o["src"]
                da, db = a.get("dim", 1), b.get("dim", 1)
                if da != db:
                    mixed13 += da < db
                    mixed31 += da > db
                elif o["op"] == "add" and synth.rank(a) != synth.rank(b):
                    swapped += synth.rank(a) > synth.rank(b)
                    kept += synth.rank(a) < synth.rank(b)
    assert swapped > 0 and kept > 0 and mixed13 > 0 and mixed31 > 0
    st = synth.swap_stats(_by_name(sample, "Medium")[1])
    assert all(v > 0 for v in st.values()), st


def test_rank_table():
    assert synth.rank({"type": "cm", "dim": 1}) == 0
    assert synth.rank({"type": "tmp", "dim": 1}) == 1
    assert synth.rank({"type": "public", "dim": 1}) == 2
    assert synth.rank({"type": "number", "dim": 1}) == 3
    assert synth.rank({"type": "airvalue", "dim": 1}) == 4
    assert synth.rank({"type": "proofvalue", "dim": 1}) == 5
    assert synth.rank({"type": "xDivXSubXi", "dim": 3}) == 6
    assert synth.rank({"type": "tmp", "dim": 3}) == 7
    assert synth.rank({"type": "airvalue", "dim": 3}) == 8
    assert synth.rank({"type": "airgroupvalue", "dim": 3}) == 9
    assert synth.rank({"type": "proofvalue", "dim": 3}) == 10
    assert synth.rank({"type": "challenge", "dim": 3}) == 11
    assert synth.rank({"type": "eval", "dim": 3}) == 12
    assert synth.swapped({"type": "cm", "dim": 1}, {"type": "challenge", "dim": 3})
    assert not synth.swapped({"type": "challenge", "dim": 3}, {"type": "cm", "dim": 1})
    assert synth.swapped({"type": "number", "dim": 1}, {"type": "tmp", "dim": 1})


def test_hints_reference_existing_expressions(sample):
    for rel, (si, ei) in sample.items():
        by_id = {e["expId"]: e for e in ei["expressionsCode"]}
        for h in ei["hintsInfo"]:
            for f in h["fields"]:
                for v in f["values"]:
                    if v["op"] == "tmp":
                        assert v["id"] in by_id, (rel, h["name"])
                        assert by_id[v["id"]]["code"][-1]["dest"]["dim"] == v["dim"]
                        assert v["id"] not in (si["cExpId"], si["friExpId"])


def test_model_parses_sample(sample):
    from codegen import model
    for rel, (si, ei) in sample.items():
        m = model.parse_starkinfo(si, rel)
        model.parse_expressionsinfo(ei, rel, m)


# ----------------------------------------------------------------------------- generator
@pytest.mark.parametrize("seed", range(6))
def test_make_air_random_params(seed):
    import random
    r = random.Random(seed)
    params = synth.AirParams(
        f"R{seed}", seed, n_bits=r.randint(2, 8), q_ops=r.randint(20, 400), q_deg=r.choice((1, 2)),
        n_cm1=r.randint(1, 6), n_const=r.randint(1, 3),
        opening_points=r.choice(((0,), (0, 1), (-1, 0, 1), (-2, -1, 0, 1, 2))),
        im_cols=tuple(r.choice(("d1", "d3", "number", "cm")) for _ in range(r.randint(0, 3))),
        n_impol=r.randint(0, 1), gsum=r.random() < 0.5, gprod=r.random() < 0.5,
        member_hints=r.random() < 0.5, n_publics=r.randint(0, 2),
        airvalue_stages=tuple(r.choice((1, 2)) for _ in range(r.randint(0, 2))),
        airgroupvalue_stages=(2, 2),
        proofvalue_stages=tuple(r.choice((1, 2)) for _ in range(r.randint(0, 2))),
        extra_boundaries=("firstRow",) if r.random() < 0.3 else (), p_far=r.choice((0.0, 0.1)))
    si, ei = synth.make_air(params)
    synth.validate(si, ei)
    assert (si, ei) == synth.make_air(params)
    for e in ei["expressionsCode"]:
        _check_ssa(e["code"], e["expId"])
    n = len(_q(si, ei)["code"])
    assert n >= 3


def test_builder_api():
    import random
    rng = random.Random(1)
    c = synth.Code(rng, first_tmp=5)
    cm0 = synth.Val({"type": "cm", "id": 0, "prime": 0, "dim": 1}, 1)
    a = c.op("mul", cm0, synth.challenge(0), order=False)
    b = c.op("sub", a, synth.number("3"), order=True)
    assert c.ops[0]["src"][0]["type"] == "cm" and c.ops[1]["src"][0]["type"] == "number"
    assert b.dim == 3 and c.tmp_used == 7
    with pytest.raises(synth.SynthError):
        c.op("add", a, b, tmp_id=5)
    d = synth.Code(rng)
    r = d.replay(c.ops)
    assert [o["op"] for o in d.ops] == ["mul", "sub"] and r.dim == 3
    pal = synth.Palette(rng, (0, 1), cm1=[0], consts=[0], challenges=[0])
    e = synth.Code(rng)
    v = synth.random_dag(e, 30, 3, pal)
    assert v.dim == 3 and e.ops[-1]["dest"]["id"] == v.tmp_id
    used = {s["id"] for o in e.ops for s in o["src"] if s["type"] == "tmp"}
    assert used == {o["dest"]["id"] for o in e.ops[:-1]}      # no dead temps


def test_large_ops_cli(tmp_path):
    subprocess.run([sys.executable, "-m", "codegen.sample.synth", "--large-ops", "3000", str(tmp_path)],
                   cwd=ROOT, check=True, capture_output=True)
    airs = _airs(tmp_path)
    assert len(airs) == 1
    (si, ei), = airs.values()
    synth.validate(si, ei)
    n = len(_q(si, ei)["code"])
    assert 2850 <= n <= 3150, n
