"""codegen.discover: placements, phases, syms and kernel keys of a provingKey; collisions,
symlinks leaving the key and hostile file names."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from pathlib import Path

import pytest

from codegen.sample import synth
from codegen.discover import (Broken, Placement, Refused, UnusableKeyError, assign_keys, discover, find_airs, shown,
                              kernels, phase_of, scan)
from buildkit import copy_sample
from require import require

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "provingkey-sample"
PK = ROOT.parent / "shared" / "pk"

SAMPLE_PLACEMENTS = [
    # rel, phase, sym
    ("synth/Basic/airs/Large/air/Large", "basic", "basic_a0_2_b5_e5722"),
    ("synth/Basic/airs/Medium/air/Medium", "basic", "basic_a0_1_b6_e624"),
    ("synth/Basic/airs/Skipped/air/Skipped", "basic", "basic_a0_3_b4_e81"),
    ("synth/Basic/airs/Tiny/air/Tiny", "basic", "basic_a0_0_b4_e50"),
    ("synth/Rec/airs/Shared/recursive1/Shared", "recursive", "recursive_a1_0_b5_e246"),
    ("synth/Rec/airs/Shared/recursive2/Shared", "recursive", "recursive_a1_0_b5_e246"),
]


@pytest.fixture
def key(tmp_path: Path) -> Path:
    """A private copy of the sample key as the checkout tracks it (no `.so` a `doit` placed)."""
    return copy_sample(tmp_path / "pk")


def _write_air(d: Path, base: str, si: dict | str, ei: dict | str = "{}") -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{base}.starkinfo.json").write_text(si if isinstance(si, str) else json.dumps(si))
    (d / f"{base}.expressionsinfo.json").write_text(ei if isinstance(ei, str) else json.dumps(ei))


def _tiny_json() -> tuple[str, str]:
    d = SAMPLE / "synth/Basic/airs/Tiny/air"
    return (d / "Tiny.starkinfo.json").read_text(), (d / "Tiny.expressionsinfo.json").read_text()


# =========================================================================== the sample key
def test_sample_placements_exact() -> None:
    places = discover(SAMPLE)
    assert [(p.rel, p.phase, p.sym) for p in places] == SAMPLE_PLACEMENTS
    root = SAMPLE.resolve()
    for p in places:
        assert p.error == ""
        assert p.key == p.sym                                   # no collision in the sample
        assert p.base == p.rel.split("/")[-1]
        assert p.air_dir == root / p.rel.rsplit("/", 1)[0]
        assert p.starkinfo == p.air_dir / f"{p.base}.starkinfo.json"
        assert p.expressions == p.air_dir / f"{p.base}.expressionsinfo.json"
        assert p.so_path == p.air_dir / f"{p.base}.exps.so"
        assert re.fullmatch(r"[0-9a-f]{64}", p.content)


def test_sample_syms_match_the_generator() -> None:
    """synth.sym_of (written independently) gives the same syms for the committed sample."""
    want = {f"{rel}/{base}": synth.sym_of(rel, si) for rel, base, si, _ in synth.sample_airs()}
    assert {p.rel: p.sym for p in discover(SAMPLE)} == want


def test_shared_airs_share_one_kernel() -> None:
    places = discover(SAMPLE)
    ks = kernels(places)
    assert list(ks) == ["basic_a0_2_b5_e5722", "basic_a0_1_b6_e624", "basic_a0_3_b4_e81", "basic_a0_0_b4_e50",
                        "recursive_a1_0_b5_e246"]
    shared = ks["recursive_a1_0_b5_e246"]
    assert [p.rel for p in shared] == ["synth/Rec/airs/Shared/recursive1/Shared",
                                       "synth/Rec/airs/Shared/recursive2/Shared"]
    assert shared[0].content == shared[1].content
    assert len({p.content for p in places}) == 5
    assert all(len(v) == 1 for k, v in ks.items() if k != "recursive_a1_0_b5_e246")


def test_discover_accepts_str_and_relative_path(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    assert [p.rel for p in discover("provingkey-sample")] == [r for r, _, _ in SAMPLE_PLACEMENTS]


def test_missing_key_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="provingKey directory not found"):
        discover(tmp_path / "nope")


def test_pk_syms_unique() -> None:
    require("pk")
    places = discover(PK)
    assert len(places) == 37
    assert all(p.error == "" and p.phase == "basic" and p.key == p.sym for p in places)
    # a kernel key never stands for two different contents
    assert len({p.key for p in places}) == len({(p.key, p.content) for p in places})


# ================================================================================= phases
@pytest.mark.parametrize("leaf,phase", [
    ("air", "basic"), ("compressor", "compressor"), ("recursive1", "recursive"), ("recursive2", "recursive"),
    ("recursive3", "recursive3"), ("vadcop_final", "final"), ("vadcop_final_compressed", "final"),
    ("final", "final"), ("aggregation", "aggregation"), ("Air", "Air"), ("airs", "airs"),
])
def test_phase_of(leaf: str, phase: str) -> None:
    assert phase_of(Path("/x/y") / leaf) == phase
    # the synthetic keys name their kernels by the same rule (one function)
    assert synth.sym_of(f"x/{leaf}", {"airgroupId": 1, "airId": 2, "starkStruct": {"nBits": 3}, "cExpId": 4}) == \
        f"{phase}_a1_2_b3_e4"


def test_sym_uses_phase_dir(key: Path) -> None:
    si, ei = _tiny_json()
    for leaf in ("compressor", "vadcop_final", "weird-phase.v2"):
        _write_air(key / "X/airs/T" / leaf, "T", si, ei)
    places = {p.air_dir.name: p for p in discover(key) if p.rel.startswith("X/")}
    assert places["compressor"].sym == "compressor_a0_0_b4_e50"
    assert places["vadcop_final"].sym == "final_a0_0_b4_e50"
    assert places["weird-phase.v2"].phase == "weird-phase.v2"
    assert places["weird-phase.v2"].sym == "weird_phase_v2_a0_0_b4_e50"   # a C identifier
    # same starkinfo and expressions as Tiny but another phase: another kernel
    assert len({p.key for p in places.values()} | {"basic_a0_0_b4_e50"}) == 4


# ============================================================================== collisions
def test_same_sym_different_expressions_get_distinct_keys(key: Path, caplog) -> None:
    r2 = key / "synth/Rec/airs/Shared/recursive2/Shared.expressionsinfo.json"
    ei = json.loads(r2.read_text())
    ei["expressionsCode"][0]["code"][0]["op"] = "mul" if ei["expressionsCode"][0]["code"][0]["op"] != "mul" else "add"
    r2.write_text(json.dumps(ei))
    with caplog.at_level(logging.WARNING, logger="exps_codegen"):
        places = discover(key)
    r1p, r2p = [p for p in places if p.phase == "recursive"]
    assert r1p.sym == r2p.sym == "recursive_a1_0_b5_e246"
    assert r1p.content != r2p.content
    assert r1p.key == f"recursive_a1_0_b5_e246_{r1p.content[:8]}"
    assert r2p.key == f"recursive_a1_0_b5_e246_{r2p.content[:8]}"
    assert r1p.key != r2p.key
    for p in (r1p, r2p):
        assert re.fullmatch(r"recursive_a1_0_b5_e246_[0-9a-f]{8}", p.key)
    # the other AIRs keep their plain sym
    assert [p.key for p in places if p.phase == "basic"] == [s for _, ph, s in SAMPLE_PLACEMENTS if ph == "basic"]
    msgs = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(msgs) == 2
    for p in (r1p, r2p):
        assert any("recursive_a1_0_b5_e246" in m and p.rel in m and p.key in m for m in msgs)
    # back to the original bytes: one shared kernel again, no warning
    shutil.copy(SAMPLE / "synth/Rec/airs/Shared/recursive2/Shared.expressionsinfo.json", r2)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="exps_codegen"):
        keys = [p.key for p in discover(key) if p.phase == "recursive"]
    assert keys == ["recursive_a1_0_b5_e246"] * 2
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_content_ignores_starkinfo_name_but_not_parsed_fields(key: Path, caplog) -> None:
    r2 = key / "synth/Rec/airs/Shared/recursive2/Shared.starkinfo.json"
    si = json.loads(r2.read_text())
    si["name"] = "SomethingElse"
    si["security"] = {"regime": "other"}                        # not read by the generator
    r2.write_text(json.dumps(si, indent=2))                     # other bytes, same parsed values
    places = discover(key)
    r1p, r2p = [p for p in places if p.phase == "recursive"]
    assert r1p.content == r2p.content and r1p.key == r2p.key == "recursive_a1_0_b5_e246"
    si["starkStruct"]["nBitsExt"] += 1                           # a value the kernel depends on
    r2.write_text(json.dumps(si))
    with caplog.at_level(logging.WARNING, logger="exps_codegen"):
        r1p, r2p = [p for p in discover(key) if p.phase == "recursive"]
    assert r1p.key != r2p.key and r1p.key.startswith("recursive_a1_0_b5_e246_")
    assert sum("recursive_a1_0_b5_e246" in r.getMessage() for r in caplog.records) == 2


def test_assign_keys_directly() -> None:
    def pl(rel, sym, content, error=""):
        return Placement(rel, Path("/k") / rel, rel.split("/")[-1], "basic", sym, Path("a"), Path("b"),
                         content, error=error)
    out = assign_keys([pl("a/x", "s1", "c" * 64), pl("b/x", "s1", "c" * 64), pl("c/x", "s1", "d" * 64),
                       pl("d/y", "s2", "e" * 64), pl("e/z;1", "s2", "", error="bad")])
    bad = "bad-" + hashlib.sha256(b"e/z;1").hexdigest()[:16]
    assert [p.key for p in out] == ["s1_cccccccc", "s1_cccccccc", "s1_dddddddd", "s2", bad]


def test_keys_of_valid_and_broken_airs_never_meet() -> None:
    """A broken AIR whose path spells a valid AIR's sym, a valid sym that spells another's derived
    key: every (sym, content) has a key of its own, and no broken AIR shares one."""
    def pl(rel, sym, content, error=""):
        return Placement(rel, Path("/k") / rel, rel.split("/")[-1], "basic", sym, Path("a"), Path("b"),
                         content, error=error)
    c, d, e = "c" * 64, "d" * 64, "e" * 64
    out = assign_keys([pl("basic/a0_0_b4_e50", "basic_a0_0_b4_e50", "", error="bad"),
                       pl("t/air/Tiny", "basic_a0_0_b4_e50", c),
                       pl("u/x", "s1", c), pl("v/x", "s1", d),
                       pl("w/x", "s1_cccccccc", e)])     # a sym that is another's derived key
    keys = [p.key for p in out]
    assert keys[1] == "basic_a0_0_b4_e50" and keys[0].startswith("bad-")
    assert keys[2:4] == ["s1_cccccccc", "s1_dddddddd"] and keys[4] == f"s1_cccccccc_{e}"
    assert len(set(keys)) == 5


# ================================================================================= symlinks
def test_symlinked_file_outside_the_key_is_not_followed(key: Path, tmp_path: Path, caplog) -> None:
    si, ei = _tiny_json()
    outside = tmp_path / "outside"
    _write_air(outside, "Evil", si, ei)
    d = key / "synth/Basic/airs/Evil/air"
    d.mkdir(parents=True)
    (d / "Evil.starkinfo.json").symlink_to(outside / "Evil.starkinfo.json")
    (d / "Evil.expressionsinfo.json").write_text(ei)
    with caplog.at_level(logging.WARNING, logger="exps_codegen"):
        places = discover(key)
    assert [p.rel for p in places] == [r for r, _, _ in SAMPLE_PLACEMENTS]
    assert any("symlink leads out of the provingKey" in r.getMessage() and "Evil" in r.getMessage()
               for r in caplog.records)
    # the expressionsinfo being the outside link is refused the same way
    (d / "Evil.starkinfo.json").unlink()
    (d / "Evil.starkinfo.json").write_text(si)
    (d / "Evil.expressionsinfo.json").unlink()
    (d / "Evil.expressionsinfo.json").symlink_to(outside / "Evil.expressionsinfo.json")
    assert [p.rel for p in discover(key)] == [r for r, _, _ in SAMPLE_PLACEMENTS]


def test_symlinked_dir_outside_the_key_is_not_walked(key: Path, tmp_path: Path) -> None:
    si, ei = _tiny_json()
    outside = tmp_path / "outside_tree"
    _write_air(outside / "air", "Out", si, ei)
    os.symlink(outside, key / "synth/Basic/airs/Out", target_is_directory=True)
    assert [p.rel for p in discover(key)] == [r for r, _, _ in SAMPLE_PLACEMENTS]
    assert find_airs(key) == [(key.resolve() / r.rsplit("/", 1)[0], r.rsplit("/", 1)[1])
                              for r, _, _ in SAMPLE_PLACEMENTS]


def test_symlink_inside_the_key_is_used(key: Path) -> None:
    d = key / "synth/Basic/airs/Alias/air"
    d.mkdir(parents=True)
    tiny = key / "synth/Basic/airs/Tiny/air"
    (d / "Alias.starkinfo.json").symlink_to(tiny / "Tiny.starkinfo.json")
    (d / "Alias.expressionsinfo.json").symlink_to(tiny / "Tiny.expressionsinfo.json")
    places = {p.rel: p for p in discover(key)}
    alias = places["synth/Basic/airs/Alias/air/Alias"]
    assert alias.error == "" and alias.sym == "basic_a0_0_b4_e50"
    assert alias.key == places["synth/Basic/airs/Tiny/air/Tiny"].key     # same content: one kernel


def test_dangling_link_and_lonely_starkinfo_are_not_airs(key: Path) -> None:
    si, _ = _tiny_json()
    d = key / "synth/Basic/airs/Half/air"
    d.mkdir(parents=True)
    (d / "Half.starkinfo.json").write_text(si)                 # no expressionsinfo
    (d / "Dang.starkinfo.json").write_text(si)
    (d / "Dang.expressionsinfo.json").symlink_to(d / "missing.json")
    (d / "notes.json").write_text("{}")
    assert [p.rel for p in discover(key)] == [r for r, _, _ in SAMPLE_PLACEMENTS]
    # not silently dropped: a line each for the summary / status
    assert scan(key).refused == [
        Refused("synth/Basic/airs/Half/air/Dang", "unreadable: expressionsinfo is a dangling symlink"),
        Refused("synth/Basic/airs/Half/air/Half", "unreadable: expressionsinfo is missing")]
    assert scan(SAMPLE).refused == [] and scan(SAMPLE).broken == []


# ============================================================================ hostile names
@pytest.mark.parametrize("base", ["a;b", "a b", "x$(id)", "q\"uote", "back`tick`", "new\nline", "ünï", "a" * 121,
                                  "semi;colon", ".", "..", ".hidden", "-flag"])
def test_hostile_file_name_is_an_error(key: Path, base: str) -> None:
    si, ei = _tiny_json()
    d = key / "synth/Basic/airs/Hostile/air"
    _write_air(d, base, si, ei)
    places = discover(key)
    [bad] = [p for p in places if p.air_dir.name == "air" and p.air_dir.parent.name == "Hostile"]
    assert bad.base == base
    assert bad.error == (f"{shown(d.resolve() / (base + '.starkinfo.json'))}: file name {base!r} is not a safe name "
                         "(a letter, digit or _, then [A-Za-z0-9_.+-], at most 120 characters)")
    assert bad.content == ""
    assert re.fullmatch(r"bad-[0-9a-f]{16}", bad.key)       # the broken AIRs' own namespace
    assert re.fullmatch(r"[A-Za-z0-9_]+", bad.sym)
    assert bad.key == "bad-" + hashlib.sha256(bad.rel.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    # the good AIRs are unaffected
    assert [(p.rel, p.key) for p in places if p is not bad] == [(r, s) for r, _, s in SAMPLE_PLACEMENTS]


@pytest.mark.parametrize("base", ["Ok_1", "v1.2+b-3", "A"])
def test_safe_names_accepted(key: Path, base: str) -> None:
    si, ei = _tiny_json()
    _write_air(key / "synth/Basic/airs/Safe/air", base, si, ei)
    [p] = [p for p in discover(key) if p.base == base]
    assert p.error == "" and p.sym == "basic_a0_0_b4_e50"


def test_bad_starkinfo_is_a_placement_error(key: Path) -> None:
    si, ei = _tiny_json()
    bad = json.loads(si)
    bad["starkStruct"]["nBits"] = "4"
    _write_air(key / "synth/Basic/airs/Bad/air", "Bad", json.dumps(bad), ei)
    _write_air(key / "synth/Basic/airs/Broken/air", "Broken", "{not json", ei)
    places = {p.base: p for p in discover(key)}
    b = places["Bad"]
    assert b.error == f"{b.starkinfo}: starkStruct.nBits: expected an integer, got '4'"
    assert b.key == "bad-" + hashlib.sha256(b"synth/Basic/airs/Bad/air/Bad").hexdigest()[:16] and b.sym == "basic_Bad"
    assert places["Broken"].error.startswith(f"{places['Broken'].starkinfo}: <root>: invalid JSON")
    assert [places[b].key for b in ("Large", "Medium", "Skipped", "Tiny")] == [
        s for _, ph, s in SAMPLE_PLACEMENTS if ph == "basic"]


# ======================================================= scan(): refused AIRs and stale .so files
TINY_REL = "synth/Basic/airs/Tiny/air/Tiny"


def _so(key: Path, rel: str = TINY_REL) -> Path:
    p = key / (rel + ".exps.so")
    p.write_bytes(b"old kernel")
    return p


@pytest.mark.parametrize("make,why", [
    (lambda p: (p.unlink(), os.mkfifo(p)), "starkinfo is a FIFO"),
    (lambda p: (p.unlink(), p.mkdir()), "starkinfo is a directory"),
    (lambda p: (p.unlink(), p.symlink_to(p.name)), "starkinfo is a symlink loop"),
    (lambda p: p.with_name("Tiny.expressionsinfo.json").unlink(), "expressionsinfo is missing"),
    (lambda p: (p.unlink(), p.symlink_to("nowhere.json")), "starkinfo is a dangling symlink"),
])
def test_unreadable_air_with_so_is_broken(key: Path, make, why: str) -> None:
    so = _so(key)
    make(key / (TINY_REL + ".starkinfo.json"))
    sc = scan(key)           # returns (a FIFO is never opened: this would block)
    assert [p.rel for p in sc.placements] == [r for r, _, _ in SAMPLE_PLACEMENTS if r != TINY_REL]
    assert sc.broken == [Broken(TINY_REL, so, f"was built, now unreadable: {why}")]
    assert sc.refused == []
    assert discover(key) == sc.placements


def test_unreadable_air_without_so_is_refused(key: Path) -> None:
    p = key / (TINY_REL + ".starkinfo.json")
    p.unlink()
    os.mkfifo(p)
    sc = scan(key)
    assert sc.broken == []
    assert sc.refused == [Refused(TINY_REL, "unreadable: starkinfo is a FIFO")]
    assert TINY_REL not in [q.rel for q in sc.placements]


def test_so_whose_air_is_gone_is_broken(key: Path) -> None:
    d = key / "synth/Basic/airs/Gone/air"
    d.mkdir(parents=True)
    so = d / "Gone.exps.so"
    so.write_bytes(b"x")
    good = _so(key)                       # the .so of a valid AIR is not broken
    sc = scan(key)
    assert sc.broken == [Broken("synth/Basic/airs/Gone/air/Gone", so,
                                "was built, now its AIR is gone: no Gone.starkinfo.json")]
    assert good.exists() and len(sc.placements) == len(SAMPLE_PLACEMENTS)


def test_non_utf8_air_is_refused_or_broken(key: Path) -> None:
    si, ei = _tiny_json()
    d = Path(os.fsdecode(bytes(key / "synth/Basic/airs") + b"/Bad\xff/air"))
    _write_air(d, "Bad", si, ei)
    sc = scan(key)
    assert sc.refused == [Refused("synth/Basic/airs/Bad\\xff/air/Bad", "refused: path is not valid UTF-8")]
    assert sc.broken == []
    assert [p.rel for p in sc.placements] == [r for r, _, _ in SAMPLE_PLACEMENTS]
    so = d / "Bad.exps.so"
    so.write_bytes(b"x")
    sc = scan(key)
    assert sc.refused == []
    assert sc.broken == [Broken("synth/Basic/airs/Bad\\xff/air/Bad", so,
                                "was built, now refused: path is not valid UTF-8")]


def test_non_utf8_key_root_is_one_line_error(tmp_path: Path) -> None:
    root = Path(os.fsdecode(bytes(tmp_path) + b"/k\xfe y"))
    copy_sample(root)
    with pytest.raises(UnusableKeyError) as e:
        scan(root)
    assert str(e.value) == f"provingKey path is not valid UTF-8: {tmp_path}/k\\xfe y"
