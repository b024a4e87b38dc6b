"""Identical device code compiles once per build: kernels are named by a digest of
their content (`emit.kernel_name`), not by the kernel key, so two AIRs with the same expressions
emit the same device TU text and share one object-cache entry, one nvcc run; two AIRs whose
expressions differ under the same expIds get different names, different TU text, different
objects, and each `.so` computes its own expressions."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import buildkit as bk
from codegen.coverage import cover
from codegen.emit import KernelSource, render, x_parts
from codegen.model import load_air
from codegen.plan import plan

TWIN = "synth/Basic/airs/Twin/air/Twin"        # Tiny with another airId: another kernel key, same code
OTHER = "synth/Basic/airs/Other/air/Other"     # Tiny with another airId and expression 11 changed
CHANGED = 11


def _add_air(pk: Path, rel: str, air_id: int, change_expr: int | None = None) -> None:
    d = pk / Path(rel).parent
    d.mkdir(parents=True, exist_ok=True)
    si = json.loads((pk / (bk.TINY + ".starkinfo.json")).read_text())
    si["airId"] = air_id
    (pk / (rel + ".starkinfo.json")).write_text(json.dumps(si))
    ei = json.loads((pk / (bk.TINY + ".expressionsinfo.json")).read_text())
    if change_expr is not None:
        [e] = [e for e in ei["expressionsCode"] if e["expId"] == change_expr]
        assert e["code"][0]["op"] == "mul"
        e["code"][0]["op"] = "add"
    (pk / (rel + ".expressionsinfo.json")).write_text(json.dumps(ei))


def _sources(pk: Path, rel: str, key: str) -> dict[str, str]:
    si, ei = load_air(pk / (rel + ".starkinfo.json"), pk / (rel + ".expressionsinfo.json"))
    cov = cover(si, ei)
    return render(KernelSource(key, cov.q, plan(cov.q, 0), cov.exprs, "0" * 64))


def test_names_are_content_digests(tmp_path: Path) -> None:
    """Emit only: Tiny and its twin differ in their key only, so their device TUs are the same
    text (their launch tables differ: key, source hash); Other's changed expression gets another
    name, its other kernels keep theirs."""
    pk = bk.copy_key(tmp_path / "pk", (bk.TINY,))
    _add_air(pk, TWIN, 5)
    _add_air(pk, OTHER, 6, change_expr=CHANGED)
    a, b, c = (_sources(pk, r, k) for r, k in ((bk.TINY, "ka"), (TWIN, "kb"), (OTHER, "kc")))
    assert a["ka_q0_x0.cu"] == b["kb_q0_x0.cu"] and "ka" not in a["ka_q0_x0.cu"]
    assert a["ka_q0_x0.cu"] != c["kc_q0_x0.cu"]
    si, ei = load_air(pk / (bk.TINY + ".starkinfo.json"), pk / (bk.TINY + ".expressionsinfo.json"))
    sj, ej = load_air(pk / (OTHER + ".starkinfo.json"), pk / (OTHER + ".expressionsinfo.json"))
    na = {d["exp_id"]: d["kname"] for d in x_parts(KernelSource("ka", None, None, cover(si, ei).exprs))}
    nc = {d["exp_id"]: d["kname"] for d in x_parts(KernelSource("kc", None, None, cover(sj, ej).exprs))}
    assert set(na) == set(nc) and str(CHANGED) in na
    assert {e for e in na if na[e] != nc[e]} == {str(CHANGED)}
    assert na[str(CHANGED)].endswith(f"_x_e{CHANGED}") and nc[str(CHANGED)].endswith(f"_x_e{CHANGED}")


@pytest.mark.requires("nvcc")
def test_identical_kernels_compile_once_different_ones_apart(tmp_path: Path) -> None:
    kit = bk.new_kit(tmp_path, airs=(bk.TINY,))
    _add_air(kit.pk, TWIN, 5)
    _add_air(kit.pk, OTHER, 6, change_expr=CHANGED)
    # three kernels' cc may run at once (-j 3): the shared TU still compiles once
    kit.cli("build", str(kit.pk), *bk.CLI_ARGS, "--build-dir", str(kit.build), "--launcher", kit.launcher,
            "-j", "3")
    keys = {rel: key for rel, key in ((bk.TINY, bk.TINY_KEY), (TWIN, "basic_a0_5_b4_e50"),
                                      (OTHER, "basic_a0_6_b4_e50"))}
    assert sorted(p.name for p in kit.build.iterdir() if (p / "manifest.json").is_file()) == sorted(keys.values())
    tu = {rel: kit.build / k / "src" / f"{k}_q0_x0.cu" for rel, k in keys.items()}
    assert kit.tus(keys[TWIN]) == [f"{keys[TWIN]}_abi.cpp", f"{keys[TWIN]}_q0_x0.cu", "exps_xinv.cu"]
    # nvcc runs (the launcher logs every one but the launch tables'): ONE compile of the device TU
    # Tiny and Twin share, one of Other's, one of the generic inverse kernel's TU (the same text in
    # all three), the generic launcher once, and a link per .so
    calls = kit.calls()
    dev = [n for n in calls.compiles if n.endswith(".cu")]
    inv = [n for n in dev if n.endswith("_xinv.cu")]
    assert len(dev) == 3 and dev.count(tu[OTHER].name) == 1 and len(inv) == 1, calls.compiles
    assert set(dev) - {tu[OTHER].name, *inv} <= {tu[bk.TINY].name, tu[TWIN].name}, calls.compiles
    assert [n for n in calls.compiles if not n.endswith(".cu")] == ["exps_runtime.cpp"], calls.compiles
    assert sorted(calls.links) == sorted(keys.values())
    # the cache: one entry for the shared TU, another for Other's; the fatbins accordingly
    ck = {rel: bk.cache_key_of(p) for rel, p in tu.items()}
    assert ck[bk.TINY] == ck[TWIN] != ck[OTHER]
    assert len({bk.cache_key_of(kit.build / k / "src" / "exps_xinv.cu") for k in keys.values()}) == 1
    entries = {p.stem for p in kit.cache.glob("??/*.obj")}
    assert {ck[bk.TINY], ck[OTHER]} <= entries
    fat = {rel: (kit.build / k / "obj" / f"{k}_q0_x0.o").read_bytes() for rel, k in keys.items()}
    assert fat[bk.TINY] == fat[TWIN] != fat[OTHER]
    # every .so holds its own kernels: Other's changed expression under its own name, never Tiny's
    sym = {rel: kit.manifest(key)["kernels"][f"{key}_q0_x0.cu"] for rel, key in keys.items()}
    so = {rel: bk.so_path(kit.pk, rel).read_bytes() for rel in keys}
    changed = [n for n in sym[OTHER] if f"_x_e{CHANGED}_k" in n]    # its WRITE kernel, and _ki if a hint inverts it
    assert 1 <= len(changed) <= 2 and all(n not in sym[bk.TINY] and n.encode() in so[OTHER] for n in changed)
    assert not any(n.encode() in so[OTHER] for n in set(sym[bk.TINY]) - set(sym[OTHER]))
    assert set(sym[bk.TINY]) == set(sym[TWIN])
    # and computes them: the host check of every AIR against the oracle of its own JSON
    p = kit.cli("verify", str(kit.pk), *bk.CLI_ARGS, "--build-dir", str(kit.build), check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    for rel in keys:
        assert rel in p.stdout
