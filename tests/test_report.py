"""The build report: `<build>/report.json` (strict JSON, the schema of
codegen/report.py) and `<build>/report.html`, written after every build and by
`exps-codegen report PK`; the page loads in a real headless browser and shows every AIR."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import buildkit as bk
from codegen.build import report

pytestmark = pytest.mark.requires("nvcc")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Tiny, Skipped, and the Shared pair, autotuned (probes recorded)."""
    kit = bk.new_kit(tmp_path_factory.mktemp("report"), airs=bk.SMALL)
    kit.chunk = None  # type: ignore[assignment]
    argv = [a for a in kit.doit_argv() if not a.startswith("chunk=")]
    p = subprocess.run(argv, cwd=kit.root, env=kit.env(), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return kit, p


def _strict(path: Path) -> dict:
    return json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{path}: {c}"))


def test_report_json_after_a_build(built) -> None:
    kit, p = built
    assert f"report: {kit.build / 'report.html'}" in p.stdout
    rep = _strict(kit.build / "report.json")
    assert rep["format"] == report.FORMAT and rep["tool"] == "exps-codegen"
    assert rep["totals"] == {"airs": 4, "kernels_generated": 2, "compiled": 2, "linked": 3, "placed": 3,
                             "skipped": 1, "bad_input": 0, "failed": 0, "tus": 4, "cache_hits": 3}
    # Tiny's one TU and Shared's one (Shared is one kernel: its 8 B of spill are within
    # autotune.SPILL_SLACK_BYTES), each its first probe compiled as cc compiles it, so an object-cache
    # hit; and each kernel's generic inverse kernel TU (`exps_xinv.cu`, one text: compiled for the
    # first kernel, a hit for the other)
    assert rep["wall_s"] > 0 and rep["cpu_s"] > 0
    assert {a["air"]: a["result"] for a in rep["airs"]} == {
        bk.TINY: "placed", bk.SKIPPED: "skipped", bk.SHARED1: "placed", bk.SHARED2: "placed"}
    k = {x["key"]: x for x in rep["kernels"]}
    tiny = k[bk.TINY_KEY]
    assert tiny["q_ops"] == 39 and tiny["chunking"]["how"] == "probed" and tiny["chunking"]["arch"] == 90
    assert tiny["max_live"] == 10             # codegen.plan.max_live of Tiny's Q (brute force: test_plan)
    assert len(tiny["probes"]) >= 1
    assert any(pr["ops_per_chunk"] == tiny["chunking"]["ops_per_chunk"] for pr in tiny["probes"])
    assert len(tiny["regs_per_chunk"]) == tiny["chunks"] and all(r > 0 for r in tiny["regs_per_chunk"])
    # one TU of its own and the generic inverse kernel's; its first probe was the former compiled
    # as cc compiles it: a cache hit (and the latter one if Shared's cc ran first)
    assert tiny["tus"] == 2 and tiny["cache_hits"] in (1, 2) and tiny["stage_seconds"]["cc"] > 0
    assert tiny["cache_hits"] + k[bk.SHARED_KEY]["cache_hits"] == 3
    assert k[bk.SHARED_KEY]["airs"] == [bk.SHARED1, bk.SHARED2]
    assert k[bk.SHARED_KEY]["chunks"] == 1 and k[bk.SHARED_KEY]["tus"] == 2
    assert "boundaries" in k[bk.SKIPPED_KEY]["skip"]


def test_report_command_rebuilds_it(built, tmp_path: Path) -> None:
    kit, _ = built
    before = _strict(kit.build / "report.json")
    (kit.build / "report.json").unlink()
    (kit.build / "report.html").unlink()
    p = kit.cli("report", str(kit.pk), "--build-dir", str(kit.build))
    assert p.stdout.split() == [str(kit.build / "report.json"), str(kit.build / "report.html")]
    after = _strict(kit.build / "report.json")
    assert after["totals"] == before["totals"]
    assert [k["regs_per_chunk"] for k in after["kernels"]] == [k["regs_per_chunk"] for k in before["kernels"]]
    p = kit.cli("report", str(kit.pk), "--build-dir", str(tmp_path / "none"), check=False)
    assert p.returncode == 2 and p.stderr.startswith("exps-codegen: error: no build dir")


@pytest.mark.requires("chromium")
def test_report_page_loads_in_a_headless_browser(built, tmp_path: Path) -> None:
    kit, _ = built
    page = kit.build / "report.html"
    argv = [shutil.which("chromium") or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom", page.as_uri()]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    dom = p.stdout
    assert "<h1>exps-codegen build report</h1>" in dom
    for air in (bk.TINY, bk.SKIPPED, bk.SHARED1, bk.SHARED2):
        assert f"<td>{air}</td>" in dom, air
    assert dom.count("<svg") == 3 and "registers per Q chunk" in dom
    assert "4 AIRs: 2 kernels generated, 2 compiled" in " ".join(dom.split())
