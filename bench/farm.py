"""Build farm benchmark (docs/BUILD-FARM.md, docs/BENCHMARKS.md "Build farm"): one key built cold
(fresh build dir, object cache and sccache caches each time) several ways on this machine, wall
and CPU of every process involved, and the `.so` files of every way compared byte for byte.

    python3 bench/farm.py [--pk ../shared/pk] [--slots N] [--ways local1,localN,sccacheN,distN,distN+] [--out DIR]

Ways (N = --slots, default this machine's cores):
  local1    no launcher, `-j 1`: one local job
  localN    no launcher, `-j N`
  sccacheN  launcher=sccache with its local cache only, `-j N`
  distN     launcher=sccache with a scheduler and one build server (sccache-dist, overlay builder)
            on 127.0.0.1, whose N cores are its slots, `-j N`: sccache packages our nvcc's
            toolchains (cicc, ptxas, the host compiler) and the server unpacks them first
  distN+    the same again, the toolchains already packaged and on the server (a farm's usual
            build); the compile caches cold as before

CPU is counted per process and everything it starts: the build (Python, the launch tables and
links, and nvcc itself without a launcher), sccache's server (run in the foreground as our child:
nvcc --dryrun, the host preprocessor, fatbinary, cicc / ptxas / the host compiler when it compiles
here), the scheduler and the build server (its sandboxes, cicc, ptxas and the host compiler it
ran). Each runs in a cpuacct cgroup of its own (cgroup v1, /sys/fs/cgroup/cpuacct/exps-farm-*,
removed after): the build server's sandboxed compilers escape its rusage (they are not its
waited children: a server's os.wait4 shows ~0 s for a 3 s compile). Without a writable cpuacct
hierarchy, os.wait4's rusage is used and the server's CPU is left out (said in farm.json).
Other users' load is the machine's busy time over the run (/proc/stat) less ours. local1 also logs each nvcc call's CPU (bench/nvcc_log.sh) and
bench/nvcc_by_tu.py's table of it: the per-TU costs behind the estimate in docs/BENCHMARKS.md.
Writes DIR/farm.json and prints a markdown table.

    python3 bench/farm.py --estimate DIR/farm.json [--airs 100] [--cores 16] [--client-cores 16]

prints the estimate of a key of --airs AIRs on 1, 4 and 16 build servers of --cores cores each,
from that run's measured costs (the model is in `estimate`'s doc).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from codegen.build import farm, sccache  # noqa: E402


CGROUP_ROOT = Path("/sys/fs/cgroup/cpuacct")


class CpuGroup:
    """A cpuacct cgroup of our own: the CPU of every process put in it and of all it starts."""

    def __init__(self, name: str) -> None:
        self.path = CGROUP_ROOT / f"exps-farm-{os.getpid()}-{name}"
        self.path.mkdir()

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def seconds(self) -> float:
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def cgroups_work() -> bool:
    try:
        g = CpuGroup("probe")
    except OSError:
        return False
    g.remove()
    return True


def _busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine so far (/proc/stat's cpu line)."""
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = f[3] + f[4]
    return sum(f) - idle, sum(f)


def _cpu_s(ru) -> float:
    return ru.ru_utime + ru.ru_stime


def _wait(p: subprocess.Popen, timeout: float) -> float:
    """Wait for child `p` (its own, not Popen's, wait4: the rusage) and return its CPU seconds."""
    end = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return _cpu_s(ru)
        if time.monotonic() > end:
            p.kill()
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            return _cpu_s(ru)
        time.sleep(0.05)


PROBE_TU = 'extern "C" __global__ void probe_{i}(unsigned long long* a) {{ a[{i}] = a[0] * {i} + 1; }}\n'
PROBE_FLAGS = ["-c", "-fatbin", "-O1", "-std=c++17", "-Xptxas=-v", "-gencode", "arch=compute_90,code=sm_90",
               "-gencode", "arch=compute_90,code=compute_90"]


def job_overhead(d: Path, env: dict, groups: dict, n: int = 10) -> dict:
    """A trivial TU (cicc and ptxas ~60 ms of CPU), `n` unique ones one after another: through the
    farm (wall, and the CPU of the build server and of sccache's server per compile) and with
    plain nvcc (wall, CPU)."""
    d.mkdir(parents=True, exist_ok=True)
    tus = []
    for i in range(2 * n):
        (d / f"p{i}.cu").write_text(PROBE_TU.format(i=i + 1000 * os.getpid() % 997))
        tus.append(f"p{i}.cu")
    srv = [g for name, g in groups.items() if name.startswith("server")]
    cli = groups.get("sccache server")
    c0 = (sum(g.seconds() for g in srv), cli.seconds() if cli else 0.0)
    t0 = time.monotonic()
    for tu in tus[:n]:
        subprocess.run(["sccache", "nvcc", *PROBE_FLAGS, tu, "-o", tu + ".fatbin"], cwd=d, env=env,
                       check=True, capture_output=True)
    farm_wall = (time.monotonic() - t0) / n
    c1 = (sum(g.seconds() for g in srv), cli.seconds() if cli else 0.0)
    r0 = os.times()
    t0 = time.monotonic()
    for tu in tus[n:]:
        subprocess.run(["nvcc", *PROBE_FLAGS, tu, "-o", tu + ".fatbin"], cwd=d, check=True, capture_output=True)
    local_wall = (time.monotonic() - t0) / n
    r1 = os.times()
    return {"n": n, "farm_wall_s": round(farm_wall, 3), "farm_server_cpu_s": round((c1[0] - c0[0]) / n, 3),
            "farm_client_cpu_s": round((c1[1] - c0[1]) / n, 3), "local_wall_s": round(local_wall, 3),
            "local_cpu_s": round((r1.children_user + r1.children_system - r0.children_user - r0.children_system) / n, 3)}


def _so_digests(pk: Path) -> dict[str, str]:
    return {str(p.relative_to(pk)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(pk.rglob("*.exps.so"))}


def run_way(way: str, pk_src: Path, work: Path, slots: int, log_nvcc: bool, use_cgroups: bool) -> dict:
    """One cold build of a copy of `pk_src` (.so files land in the copy) the way `way` says."""
    groups: dict[str, CpuGroup] = {}
    snap: dict[str, float] = {}

    def group(name: str, pid: int) -> None:
        if use_cgroups:
            groups[name] = CpuGroup(name)
            groups[name].add(pid)
    d = work / way
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    pk = d / "pk"
    shutil.copytree(pk_src, pk, ignore=shutil.ignore_patterns("*.exps.so"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPS_", "CCACHE_", "SCCACHE_"))}
    env.update({"EXPS_BUILD_ROOT": str(d / "builds"), "EXPS_CACHE_DIR": str(d / "exps-cache")})
    jobs = 1 if way == "local1" else slots
    if log_nvcc:
        env.update({"EXPS_NVCC": str(REPO / "bench" / "nvcc_log.sh"), "NVCC_LOG": str(d / "nvcc_calls.log")})
    procs: dict[str, float] = {}
    farm_ctx = None
    client = None
    try:
        if way.startswith(("sccache", "dist")):
            env.update({"EXPS_LAUNCHER": "sccache", "SCCACHE_DIR": str(d / "sccache"),
                        "SCCACHE_SERVER_PORT": str(farm.free_port()), "SCCACHE_IDLE_TIMEOUT": "0"})
            if way.startswith("dist"):
                farm_ctx = farm.LocalFarm(work / "farm").__enter__()    # shared by the dist ways
                for name, fp in farm_ctx.procs.items():
                    group(name, fp.pid)
                env = farm_ctx.client_env(env, d / "sccache", int(env["SCCACHE_SERVER_PORT"]))
                env["SCCACHE_IDLE_TIMEOUT"] = "0"
            # sccache's server in the foreground, as our child (SCCACHE_START_SERVER=1 is how
            # `sccache --start-server` runs it), so that os.wait4 gives its CPU
            client = subprocess.Popen(["sccache"], env=dict(env, SCCACHE_START_SERVER="1", SCCACHE_NO_DAEMON="1",
                                                            TMPDIR=tempfile.gettempdir()),
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=open(d / "sccache-server.log", "wb"), start_new_session=True)
            group("sccache server", client.pid)
            for _ in range(100):
                if subprocess.run(["sccache", "--show-stats"], env=env, capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)
        b0, t0j = _busy_jiffies()
        load0 = os.getloadavg()
        t0 = time.monotonic()
        with open(d / "build.log", "wb") as out:
            gb = CpuGroup("build") if use_cgroups else None
            p = subprocess.Popen([sys.executable, "-m", "codegen.cli", "build", str(pk), "-j", str(jobs)],
                                 cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                 preexec_fn=(lambda: gb.add(os.getpid())) if gb else None)
            if gb:
                groups["build"] = gb
            procs["build"] = _wait(p, 3600)
        wall = time.monotonic() - t0
        b1, t1j = _busy_jiffies()
        hz = os.sysconf("SC_CLK_TCK")
        rc = p.returncode
        stats = sccache.stats(env=env) if client else None
        snap = {name: g.seconds() for name, g in groups.items()}     # the build's share
        overhead = job_overhead(d / "probe", env, groups) if way.endswith("+") and use_cgroups else None
    finally:
        if client is not None:
            subprocess.run(["sccache", "--stop-server"], env=env, capture_output=True, timeout=60)
            procs["sccache server"] = _wait(client, 60)
        if farm_ctx is not None:
            for name, fp in farm_ctx.procs.items():
                if fp.poll() is None:
                    os.killpg(fp.pid, 15)
                procs[name] = _wait(fp, 30) if fp.returncode is None else 0.0
            farm_ctx.procs.clear()
        for name, g in groups.items():
            procs[name] = snap[name] if name in snap else g.seconds()
            g.remove()
    ours = sum(procs.values())
    busy = (b1 - b0) / hz
    res = {"way": way, "jobs": jobs, "rc": rc, "cpu_from": "cgroups" if use_cgroups else "rusage", "wall_s": round(wall, 2), "cpu_s": round(ours, 2),
           "cpu_by_process": {k: round(v, 2) for k, v in procs.items()},
           "machine_busy_s": round(busy, 2), "others_busy_s": round(max(0.0, busy - ours), 2),
           "loadavg_before": [round(x, 2) for x in load0],
           "so": _so_digests(pk)}
    if stats is not None:
        res["sccache"] = {k: stats[k] for k in ("compile_requests", "cache_hits", "cache_misses",
                                                "dist_compiles", "dist_errors", "compile_fails")}
    if overhead is not None:
        res["job_overhead"] = overhead
    if way.startswith("dist") and (work / "farm" / "client-toolchains").is_dir():
        res["toolchain_bytes"] = sum(f.stat().st_size for f in (work / "farm" / "client-toolchains").rglob("*")
                                     if f.is_file())
    if log_nvcc:
        res["nvcc_by_tu"] = subprocess.run([sys.executable, str(REPO / "bench" / "nvcc_by_tu.py"),
                                            str(d / "nvcc_calls.log")], capture_output=True, text=True).stdout
        calls = [ln.split(" ", 2) for ln in (d / "nvcc_calls.log").read_text().splitlines()]
        res["nvcc_calls"] = [(float(c), float(w), a[-160:]) for c, w, a in calls]
    rep = next((d / "builds").glob("*/report.json"), None)
    if rep is not None:
        r = json.loads(rep.read_text())
        res["kernels"] = [{"key": k.get("key"), "stage_seconds": k.get("stage_seconds")} for k in r.get("kernels", [])]
    return res


def _kernel_compiles(calls: list, key: str) -> list[float]:
    """CPU seconds of each nvcc call of local1 that compiled one of kernel `key`'s TUs (its tune
    probes, its TUs, their twins; not its launch table or link)."""
    return [cpu for cpu, _wall, args in calls
            if f"src/{key}_" in args or f" {key}_qprobe_twin.ptx" in f" {args}"
            if " -shared " not in f" {args} " and "_abi.cpp" not in args]


def estimate(path: Path, airs: int = 100, cores: int = 16, client_cores: int = 16) -> str:
    """A key of `airs` AIRs on S = 1, 4, 16 build servers of `cores` cores, from one bench run:

    - the build servers' CPU R (cicc, ptxas, the host compiler, their sandboxes), from the
      `distN+` way, per second of local1's nvcc CPU;
    - the client's CPU L (from `distN+`): the build process (Python, launch tables, links) per AIR,
      plus sccache's server (nvcc --dryrun, the host preprocessor, fatbinary, hashing) per compile;
    - the critical path P: the kernel whose compiles take longest in all in `local1`, each compile
      plus the farm's extra latency (the trivial TU's wall through the farm less plain nvcc's),
      all one after another (an upper bound: its tune probes do run one at a time, but its TUs
      compile side by side);
    - wall ~ max(P, R / (S * cores), L / client_cores): the longest chain, the farm's slots and the
      client's cores each bound it. Not modelled: network time (each server receives each
      toolchain once, `toolchain_bytes`, and each job's preprocessed TU), and the scheduler
      turning jobs away when every slot is taken (the client then compiles them itself: `-j`
      should not exceed the farm's slots).
    Two keys: `airs` AIRs of the run's mix (its AIRs scaled), and `airs` AIRs each like the run's
    costliest kernel."""
    d = json.loads(Path(path).read_text())
    res = {r["way"]: r for r in d["results"]}
    l1 = res["local1"]
    dist = next(r for w, r in res.items() if w.endswith("+"))
    n = len(l1["so"])
    srv = sum(v for k, v in dist["cpu_by_process"].items() if k.startswith("server"))
    build, scc = dist["cpu_by_process"]["build"], dist["cpu_by_process"].get("sccache server", 0.0)
    requests = dist["sccache"]["compile_requests"]
    jo = dist["job_overhead"]
    extra = max(0.0, jo["farm_wall_s"] - jo["local_wall_s"])
    nvcc_cpu = sum(c for c, _, _ in l1["nvcc_calls"])
    top = max((sum(_kernel_compiles(l1["nvcc_calls"], k["key"])), k["key"]) for k in l1.get("kernels", []))
    top_calls = _kernel_compiles(l1["nvcc_calls"], top[1])
    path_s = sum(c + extra for c in top_calls)
    out = [f"From {path} ({n} AIRs, {d['meta']['cores']} cores; {dist['way']}): build servers {srv:.1f} s of CPU "
           f"({srv / nvcc_cpu:.2f} s per second of local1's nvcc CPU, {nvcc_cpu:.1f} s); client {build:.1f} s "
           f"in the build ({build / n:.2f} s per AIR) + {scc:.1f} s in sccache's server ({scc / requests:.2f} s per "
           f"compile, {requests} compiles); one local job {l1['cpu_s']:.1f} s of CPU; +{extra:.2f} s of wall per "
           f"compile through the farm. Longest chain: {top[1]}, {len(top_calls)} compiles, {top[0]:.1f} s of CPU, "
           f"{path_s:.1f} s through the farm.", "",
           f"| key | one local job | 1 x {cores} cores | 4 x {cores} | 16 x {cores} | bound by (1 / 4 / 16) |",
           "| --- | --- | --- | --- | --- | --- |"]
    keys = ((f"{airs} AIRs of this mix", airs / n * srv, airs / n * (build + scc), airs / n * l1["cpu_s"]),
            (f"{airs} AIRs like {top[1]}", airs * top[0] * srv / nvcc_cpu,
             airs * (build / n + len(top_calls) * scc / requests),
             airs * (top[0] + (l1["cpu_s"] - nvcc_cpu) / n)))
    for name, r_, l_, local in keys:
        cells, why = [], []
        for s_ in (1, 4, 16):
            parts = {"chain": path_s, "servers": r_ / (s_ * cores), "client": l_ / client_cores}
            cells.append(f"{max(parts.values()):.0f} s")
            why.append(max(parts, key=parts.get))
        out.append(f"| {name} | {local:.0f} s | " + " | ".join(cells) + f" | {' / '.join(why)} |")
    out.append(f"\n(the client: {client_cores} cores)")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pk", type=Path, default=REPO.parent / "shared" / "pk")
    ap.add_argument("--slots", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--ways", default="local1,localN,sccacheN,distN,distN+")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "exps-farm-bench")
    ap.add_argument("--estimate", type=Path, help="a farm.json: print the estimate from it (no builds)")
    ap.add_argument("--airs", type=int, default=100)
    ap.add_argument("--cores", type=int, default=16, help="cores of each build server (--estimate)")
    ap.add_argument("--client-cores", type=int, default=16)
    a = ap.parse_args(argv)
    if a.estimate:
        print(estimate(a.estimate, a.airs, a.cores, a.client_cores))
        return 0
    ways = [w.replace("N", str(a.slots)) for w in a.ways.split(",")]
    if any(w.startswith("dist") for w in ways):
        why = farm.sandbox_problem()
        if why:
            print(f"farm bench: the dist way cannot run here: {why}", file=sys.stderr)
            return 2
    a.out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(a.out / "work", ignore_errors=True)
    meta = {"machine": platform.node(), "cpu": next((ln.split(":", 1)[1].strip() for ln in
                                                     Path("/proc/cpuinfo").read_text().splitlines()
                                                     if ln.startswith("model name")), "?"),
            "cores": os.cpu_count(), "pk": str(a.pk), "slots": a.slots,
            "sccache": subprocess.run(["sccache", "--version"], capture_output=True, text=True).stdout.strip(),
            "nvcc": subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]}
    use_cg = cgroups_work()
    meta["cpu_from"] = "cpuacct cgroups" if use_cg else "os.wait4 rusage (the build server's sandboxes left out)"
    results = []
    for w in ways:
        print(f"farm bench: {w} ...", file=sys.stderr, flush=True)
        results.append(run_way(w, a.pk, a.out / "work", a.slots, log_nvcc=(w == "local1"), use_cgroups=use_cg))
        r = results[-1]
        print(f"farm bench: {w}: rc {r['rc']}, {r['wall_s']} s wall, {r['cpu_s']} s CPU "
              f"(others {r['others_busy_s']} s)", file=sys.stderr, flush=True)
    ref = results[0]["so"]
    for r in results:
        r["same_so_as_first"] = r["so"] == ref
        r["so_differing_from_first"] = sorted(k for k in ref if r["so"].get(k) != ref[k])
    (a.out / "farm.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    print(f"{meta['cores']} cores ({meta['cpu']}), {meta['sccache']}, {meta['nvcc']}; {a.pk}: "
          f"{len(ref)} .so files; CPU from {meta['cpu_from']}\n")
    print("| way | -j | wall | CPU (ours) | CPU by process | others' CPU meanwhile | dist compiles | .so as local1 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        by = ", ".join(f"{k} {v:.1f}" for k, v in r["cpu_by_process"].items())
        dist = r.get("sccache", {}).get("dist_compiles")
        dist_s = (f"{sum(dist.values())} (+{r['sccache']['dist_errors']} failed)" if dist is not None else "-")
        same = "identical" if r["same_so_as_first"] else f"{len(r['so_differing_from_first'])} differ"
        print(f"| {r['way']} | {r['jobs']} | {r['wall_s']:.1f} s | {r['cpu_s']:.1f} s | {by} | "
              f"{r['others_busy_s']:.1f} s | {dist_s} | "
              f"{same} |")
    for r in results:
        if "job_overhead" in r:
            print(f"\na trivial TU, one compile after another ({r['way']}): {r['job_overhead']}")
    print(f"\n{a.out / 'farm.json'}")
    return 0 if all(r["rc"] == 0 and r["same_so_as_first"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
