"""What a circuit edit costs to rebuild: one constant of an AIR's Q changed, against a cold build.

    python3 bench/edit_cost.py [--airs Large,Medium] [--reps 3] [--arch 90] [--out FILE.json]

For each AIR of the sample (a key holding that AIR alone, copied from provingkey-sample/), each
repetition: a cold build (empty object cache and build dir), then one number literal of its Q
changed (`edit_one_constant`: a literal Q has once, to a value of its class that Q has nowhere;
an edit to or from 0, 1 or p - 1, which the value path specializes, or to a value Q has elsewhere
can change the kernel's shape, which is tuned afresh),
then the rebuild; and a cold build of the edited key in a fresh cache and build dir, whose `.so`
must be byte-identical to the rebuild's. CPU is the user + system time of the build and every
process it waited for (nvcc, ptxas, ...); nvcc runs are counted through `bench/nvcc_log.sh`
(EXPS_NVCC). Prints a markdown table of the medians; exit 1 if a rebuild's `.so` differs from the
cold build of the edited key.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "provingkey-sample"
AIRS = {"Large": "synth/Basic/airs/Large/air/Large", "Medium": "synth/Basic/airs/Medium/air/Medium",
        "Tiny": "synth/Basic/airs/Tiny/air/Tiny"}
GL_P = (1 << 64) - (1 << 32) + 1
KEPT = (0, 1, GL_P - 1)


def literal_class(v: int) -> int:
    """The halves of a 64-bit word (the classes of codegen.build.autotune._literal_class)."""
    hi, lo = v >> 32, v & 0xFFFFFFFF
    return 0 if hi == 0 else 1 if hi == 0xFFFFFFFF else 2 if lo == 0 else 3


def edit_one_constant(key: Path, rel: str) -> tuple[int, int]:
    """Change one literal of Q: the first one (not 0, 1 or p - 1) whose value Q has only there, to
    the next value of its class that Q has nowhere (a constant of the circuit edited: a range bound,
    an id; an edit to a value Q uses elsewhere can merge two ops, another shape, tuned afresh)."""
    si = json.loads((key / (rel + ".starkinfo.json")).read_text())
    path = key / (rel + ".expressionsinfo.json")
    ei = json.loads(path.read_text())
    q = next(e for e in ei["expressionsCode"] if e["expId"] == si["cExpId"])
    nums = [s for op in q["code"] for s in op["src"] if s["type"] == "number"]
    values = [int(s["value"]) for s in nums]
    src = next(s for s, v in zip(nums, values) if v not in KEPT and values.count(v) == 1)
    old = new = int(src["value"])
    while new == old or new in values or new in KEPT or literal_class(new) != literal_class(old):
        new += 1
    src["value"] = str(new)
    path.write_text(json.dumps(ei))
    return old, new


def build(key: Path, work: Path, tag: str, arch: str, cache: Path) -> dict:
    """One `exps-codegen build` with its CPU (children included), wall and nvcc runs."""
    log = work / f"nvcc-{tag}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPS_")}
    env.update({"EXPS_CACHE_DIR": str(cache), "EXPS_BUILD_ROOT": str(work / "builds"),
                "EXPS_NVCC": str(REPO / "bench" / "nvcc_log.sh"), "NVCC_LOG": str(log), "PYTHONPATH": str(REPO)})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "codegen.cli", "build", str(key), "--arch", arch, "-j", "2"],
                       env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"build of {key} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    runs = [ln for ln in (log.read_text().splitlines() if log.exists() else [])
            if " --version" not in ln and " --list-gpu-arch" not in ln]
    return {"cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "wall_s": round(wall, 2), "nvcc_runs": len(runs),
            "nvcc_cpu_s": round(sum(float(ln.split()[0]) for ln in runs), 2)}


def so_digests(key: Path) -> dict[str, str]:
    return {str(p.relative_to(key)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(key.rglob("*.exps.so"))}


def one(name: str, arch: str, tmp: Path) -> dict:
    rel = AIRS[name]
    key = tmp / "key"
    for suffix in (".starkinfo.json", ".expressionsinfo.json"):
        (key / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SAMPLE / (rel + suffix), key / (rel + suffix))
    cold = build(key, tmp, "cold", arch, tmp / "cache")
    old, new = edit_one_constant(key, rel)
    edit = build(key, tmp, "edit", arch, tmp / "cache")
    fresh = tmp / "fresh"
    shutil.copytree(key, fresh, ignore=shutil.ignore_patterns("*.exps.so"))
    (tmp / "fresh-work").mkdir()
    build(fresh, tmp / "fresh-work", "fresh", arch, tmp / "fresh-cache")
    same = so_digests(key) == so_digests(fresh) and bool(so_digests(key))
    return {"air": name, "edit": [old, new], "cold": cold, "edit_build": edit, "identical_to_cold_of_edit": same}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--airs", default="Large,Medium")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--arch", default="90")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    results = []
    for name in a.airs.split(","):
        for r in range(a.reps):
            with tempfile.TemporaryDirectory(prefix=f"edit-cost-{name}-") as t:
                results.append(one(name, a.arch, Path(t)))
                print(json.dumps(results[-1]), file=sys.stderr)
    rows = ["| AIR | cold CPU s | cold nvcc runs | edit CPU s | edit nvcc runs | edit / cold CPU | edit wall s | "
            "`.so` = cold build of the edit |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    ok = True
    for name in a.airs.split(","):
        rs = [r for r in results if r["air"] == name]
        med = lambda f, k: statistics.median(r[f][k] for r in rs)   # noqa: E731
        same = all(r["identical_to_cold_of_edit"] for r in rs)
        ok &= same
        n_same = sum(r["identical_to_cold_of_edit"] for r in rs)
        rows.append(f"| {name} | {med('cold', 'cpu_s'):.1f} | {med('cold', 'nvcc_runs'):.0f} | "
                    f"{med('edit_build', 'cpu_s'):.1f} | {med('edit_build', 'nvcc_runs'):.0f} | "
                    f"{med('edit_build', 'cpu_s') / med('cold', 'cpu_s'):.0%} | {med('edit_build', 'wall_s'):.1f} | "
                    f"{'yes' if same else 'NO'}: {n_same} of {len(rs)} |")
    print("\n".join(rows))
    if a.out:
        Path(a.out).write_text(json.dumps({"argv": sys.argv, "results": results}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
