"""Build farm (docs/BUILD-FARM.md): sccache as the compiler launcher, its cache shared by two
machines, and a real sccache-dist scheduler and build server on 127.0.0.1 compiling a key's TUs,
then the scheduler stopped mid-build. Every build places the same bytes as one without a launcher.
Also what toolchain.py does for sccache (its server started from our environment, a named work
dir with copies, no link through it) and the farm's configs (build/farm.py).

Each build is the sample's Tiny and Shared pair at arch 90, chunk 0, `-j 1` (one task at a time, so
sccache's counters are exact). Through sccache it makes these compile requests: five device TUs
(Tiny's, Shared's, the generic inverse kernel's and the device prelude's probe with and without
the prelude: build/prelude.py) and the generic launcher (host C++); the launch tables and the links
never go through a launcher. sccache splits each device compile into cicc (PTX) and ptxas (CUBIN),
and the host one into the host compiler's run (CUDA); the prelude's two probes give the same PTX,
so the second one's ptxas is a cache hit.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

import buildkit as bk
from codegen.build import farm, sccache
from codegen.build import toolchain as tc
from require import require, requires

needs_sccache = requires("nvcc", "sccache")

AIRS = (bk.TINY, bk.SHARED1, bk.SHARED2)
#: a cold build's misses through sccache: what cicc, ptxas and the host compiler ran (above)
COLD_MISSES = {"PTX": 5, "CUBIN": 4, "CUDA": 1}
COLD_HITS = {"CUBIN": 1}

#: an EXPS_NVCC that stops the scheduler (SIGTERM, then waits until its port is closed) the first
#: time nvcc is called for the Shared kernel's TU: a moment inside the build, the same every run
STOP_SCHEDULER_NVCC = """#!/bin/bash
case " $* " in *"{tu}"*)
  if mkdir {marker} 2>/dev/null; then
    kill -TERM {pid}
    for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null || break; sleep 0.1; done
  fi;;
esac
exec {nvcc} "$@"
"""


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EXPS_", "CCACHE_", "SCCACHE_"))}
    env.update({"EXPS_CACHE_DIR": str(root / "exps-cache"), "EXPS_BUILD_ROOT": str(root / "builds"),
                "EXPS_LINK_CACHE": "0"})
    return env


def _build(pk: Path, env: dict[str, str]) -> None:
    p = subprocess.run([*bk.exps_codegen(), "build", str(pk), *bk.CLI_ARGS, "-j", "1"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr


def _so_bytes(pk: Path) -> dict[str, bytes]:
    return {rel: bk.so_path(pk, rel).read_bytes() for rel in AIRS}


def _stop_client(env: dict[str, str]) -> None:
    subprocess.run(["sccache", "--stop-server"], env=env, capture_output=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    """The `.so` files of a build without a launcher."""
    root = tmp_path_factory.mktemp("local")
    pk = bk.copy_key(root / "pk", AIRS)
    _build(pk, _env(root))
    return _so_bytes(pk)


@pytest.fixture
def store(request, tmp_path: Path):
    """The store two machines share: sccache's local-dir backend (as a shared mount would be), or a
    Redis server on 127.0.0.1 (`redis-server`, no persistence), stopped after."""
    if request.param == "dir":
        yield {"SCCACHE_DIR": str(tmp_path / "store")}
        return
    require("redis")
    port = farm.free_port()
    with open(tmp_path / "redis.log", "wb") as log:
        rs = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", str(tmp_path)], stdout=log, stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 30
        while not farm._listening(port):
            assert rs.poll() is None and time.monotonic() < end, (tmp_path / "redis.log").read_text()
            time.sleep(0.1)
        yield {"SCCACHE_REDIS_ENDPOINT": f"redis://127.0.0.1:{port}"}
    finally:
        rs.terminate()
        rs.wait(timeout=30)


@needs_sccache
@pytest.mark.parametrize("store", ["dir", "redis"], indirect=True)
def test_two_machines_share_one_sccache_store(tmp_path: Path, reference, store) -> None:
    """sccache's store filled by one machine's cold build: another machine's cold build (own build
    dir, object cache and sccache server) runs no cicc, ptxas or host compile; both place the bytes
    of a build without a launcher."""
    envs = []
    try:
        for name in ("a", "b"):
            env = _env(tmp_path / name)
            env.update({"EXPS_LAUNCHER": "sccache", "SCCACHE_IDLE_TIMEOUT": "600",
                        "SCCACHE_SERVER_PORT": str(farm.free_port()), **store})
            envs.append(env)
            pk = bk.copy_key(tmp_path / name / "pk", AIRS)
            _build(pk, env)
            assert _so_bytes(pk) == reference
        a, b = (sccache.stats(env=e) for e in envs)
        assert a["compile_requests"] == 6 and a["requests_not_compile"] == 0, a
        assert a["cache_misses"]["counts"] == COLD_MISSES and a["cache_hits"]["counts"] == COLD_HITS, a
        # the second machine: every cicc, ptxas and host compile from the store
        assert b["compile_requests"] == 6 and b["cache_misses"]["counts"] == {}, b
        assert b["cache_hits"]["counts"] == {"PTX": 5, "CUBIN": 5, "CUDA": 1}, b
    finally:
        for env in envs:
            _stop_client(env)


@needs_sccache
@requires("bwrap")
def test_farm_compiles_on_its_server_and_builds_on_without_its_scheduler(tmp_path: Path, reference) -> None:
    """A real scheduler and build server (sccache-dist, overlay builder) on 127.0.0.1: a cold
    build's every cicc, ptxas and host compile runs on the server; with the scheduler stopped in
    the middle of a build, the rest of it compiles here. Both place the bytes of a build without a
    launcher."""
    why = farm.sandbox_problem()
    if why:
        pytest.skip(f"this machine cannot run sccache-dist's build server: {why}")
    clients = []
    with farm.LocalFarm(tmp_path / "farm") as f:
        [server] = f.server_addrs
        try:
            env = f.client_env(_env(tmp_path / "one"), tmp_path / "one" / "sccache")
            env["EXPS_LAUNCHER"] = "sccache"
            clients.append(env)
            pk = bk.copy_key(tmp_path / "one" / "pk", AIRS)
            _build(pk, env)
            assert _so_bytes(pk) == reference
            st = sccache.stats(env=env)
            assert st["cache_misses"]["counts"] == COLD_MISSES and st["cache_hits"]["counts"] == COLD_HITS, st
            assert st["dist_compiles"] == {server: sum(COLD_MISSES.values())} and st["dist_errors"] == 0, st

            # a second cold build (another client: empty sccache cache, object cache, build dir)
            # whose nvcc stops the scheduler when it gets to the Shared kernel's TU
            wrapper = tmp_path / "bin" / "nvcc"
            wrapper.parent.mkdir()
            wrapper.write_text(STOP_SCHEDULER_NVCC.format(
                tu=f"{bk.SHARED_KEY}_q0_x0.cu", marker=tmp_path / "stopped", pid=f.procs["scheduler"].pid,
                port=f.scheduler_port, nvcc=shutil.which("nvcc")))
            wrapper.chmod(0o755)
            env = f.client_env(_env(tmp_path / "two"), tmp_path / "two" / "sccache")
            env.update({"EXPS_LAUNCHER": "sccache", "EXPS_NVCC": str(wrapper)})
            clients.append(env)
            pk = bk.copy_key(tmp_path / "two" / "pk", AIRS)
            _build(pk, env)
            assert (tmp_path / "stopped").is_dir() and f.procs["scheduler"].wait(timeout=30) is not None
            assert _so_bytes(pk) == reference
            st = sccache.stats(env=env)
            ran = sum(st["cache_misses"]["counts"].values())
            assert st["cache_misses"]["counts"] == COLD_MISSES, st
            remote = st["dist_compiles"].get(server, 0)
            # before the stop: the prelude's probes at least (cicc twice, ptxas once) on the server;
            # after it: Shared's cicc and ptxas at least here, each a failed try of the scheduler
            assert remote >= 3 and st["dist_errors"] >= 2 and remote + st["dist_errors"] == ran, st
        finally:
            for env in clients:
                _stop_client(env)


# ------------------------------------------------------------------ toolchain.py with sccache
FAKE_SCCACHE = """#!/bin/sh
# stands in for sccache: logs its server start and each call (cwd, the TU's real path, whether
# src/ is a link), then runs the command
if [ "$1" = "--start-server" ]; then echo "start TMPDIR=$TMPDIR" >> {log}; exit 0; fi
for a in "$@"; do case "$a" in src/*) tu=$a;; arch=*) archs="$archs ${{a%%,*}}";; esac; done
echo "run $PWD $(readlink -f $tu) $([ -L src ] && echo link || echo dir)$archs" >> {log}
exec "$@"
"""


@requires("nvcc")
def test_a_compile_through_sccache_runs_in_a_named_work_dir_and_a_link_without_it(tmp_path: Path) -> None:
    """Through a launcher named sccache: its server is started once, from this process's
    environment (TMPDIR the temp root, not a compile's work dir); each compile runs in
    `<temp root>/exps-sccache-<digest of TU, text, flags>` with the TU copied in (its real path
    there: what cicc's command line holds), removed after; the link runs without it. The objects
    are those of a compile without a launcher."""
    log = tmp_path / "calls.log"
    fake = tmp_path / "bin" / "sccache"
    fake.parent.mkdir()
    fake.write_text(FAKE_SCCACHE.format(log=log))
    fake.chmod(0o755)
    src = tmp_path / "src"
    src.mkdir()
    (src / "k.cu").write_text('extern "C" __global__ void k(unsigned long long* a) { a[1] = a[0] * 3; }\n')
    (src / "h.cpp").write_text('extern "C" int h() { return 7; }\n')
    fatbin = tc.CompileOptions((90,), mode="fatbin")
    host = tc.CompileOptions((90,), mode="host")
    root = tc.safe_temp_root()
    names = [sccache.workdir_name(n, (src / n).read_bytes(), o.flags()) for n, o in (("k.cu", fatbin), ("h.cpp", host))]
    a = tc.compile_object(src / "k.cu", tmp_path / "a" / "k.fatbin", fatbin, launcher=[str(fake)])
    b = tc.compile_object(src / "k.cu", tmp_path / "b" / "k.fatbin", fatbin, launcher=[str(fake)])
    o = tc.compile_object(src / "h.cpp", tmp_path / "h.o", host, launcher=[str(fake)])
    plain = tc.compile_object(src / "k.cu", tmp_path / "c" / "k.fatbin", fatbin, launcher=[])
    so = tc.link_shared([o.obj_path], tmp_path / "lib" / "libh.so", host, launcher=[str(fake)])
    assert log.read_text().splitlines() == [
        f"start TMPDIR={root}",
        *(f"run {root}/exps-sccache-{names[0]} {root}/exps-sccache-{names[0]}/src/k.cu dir "
          "arch=compute_90 arch=compute_90" for _ in "ab"),
        f"run {root}/exps-sccache-{names[1]} {root}/exps-sccache-{names[1]}/src/h.cpp dir"]
    assert a.obj_path.read_bytes() == b.obj_path.read_bytes() == plain.obj_path.read_bytes()
    assert "sccache" not in " ".join(plain.argv) and so.is_file()
    assert not any(Path(root, f"exps-sccache-{n}").exists() for n in names)


@requires("nvcc")
def test_a_fatbin_of_several_virtual_archs_through_sccache_is_one_compile_per_arch(tmp_path: Path) -> None:
    """A `-fatbin` of sm_80 and sm_90 (and their PTX) through sccache: one compile per
    virtual arch through it (sccache 0.16 fails the whole one at random: build/sccache.py), then
    fatbinary here as nvcc's dry run says; the bytes and the ptxas report of plain nvcc's."""
    log = tmp_path / "calls.log"
    fake = tmp_path / "bin" / "sccache"
    fake.parent.mkdir()
    fake.write_text(FAKE_SCCACHE.format(log=log))
    fake.chmod(0o755)
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(unsigned long long* a) { a[1] = a[0] * 5; }\n')
    opts = tc.CompileOptions((80, 90), mode="fatbin")
    assert sccache.virtual_archs(opts.flags()) == ["80", "90"]
    assert sccache.virtual_archs(tc.gencode_flags([80, 86, 89, 90, 100, 120])) == ["80", "86", "89", "90", "100", "120"]
    split = tc.compile_object(tmp_path / "k.cu", tmp_path / "s" / "k.fatbin", opts, launcher=[str(fake)])
    plain = tc.compile_object(tmp_path / "k.cu", tmp_path / "p" / "k.fatbin", opts, launcher=[])
    assert split.obj_path.read_bytes() == plain.obj_path.read_bytes()
    assert split.report == plain.report and set(split.report["k"]) == {"sm_80", "sm_90"}
    runs = sorted(line.split(" dir ")[1] for line in log.read_text().splitlines() if line.startswith("run "))
    assert runs == ["arch=compute_80 arch=compute_80", "arch=compute_90 arch=compute_90"]   # sm_ and PTX each


@needs_sccache
def test_fatbins_of_two_virtual_archs_through_real_sccache(tmp_path: Path, monkeypatch) -> None:
    """Through sccache itself: four sm_80 + sm_90 fatbins (each would fail half the time as one
    compile) all build, with plain nvcc's bytes; the same TU again is all cache hits."""
    monkeypatch.setenv("SCCACHE_DIR", str(tmp_path / "sccache"))
    monkeypatch.setenv("SCCACHE_SERVER_PORT", str(farm.free_port()))
    monkeypatch.setenv("SCCACHE_IDLE_TIMEOUT", "600")
    monkeypatch.delenv("SCCACHE_CONF", raising=False)
    opts = tc.CompileOptions((80, 90), mode="fatbin")
    try:
        for i in range(4):
            tu = tmp_path / f"k{i}.cu"
            tu.write_text(f'extern "C" __global__ void k(unsigned long long* a) {{ a[1] = a[0] * {i + 7}; }}\n')
            got = tc.compile_object(tu, tmp_path / "s" / f"k{i}.fatbin", opts, launcher=["sccache"])
            want = tc.compile_object(tu, tmp_path / "p" / f"k{i}.fatbin", opts, launcher=[])
            assert got.obj_path.read_bytes() == want.obj_path.read_bytes(), i
        again = tc.compile_object(tmp_path / "k0.cu", tmp_path / "s" / "again.fatbin", opts, launcher=["sccache"])
        assert again.obj_path.read_bytes() == (tmp_path / "p" / "k0.fatbin").read_bytes()
        st = sccache.stats()
        assert st["cache_misses"]["counts"] == {"PTX": 8, "CUBIN": 8} and st["cache_hits"]["counts"] == {"PTX": 2, "CUBIN": 2}, st
        assert st["compile_fails"] == 0
    finally:
        subprocess.run(["sccache", "--stop-server"], capture_output=True, timeout=60, check=False)


def test_a_named_work_dir_is_waited_for_taken_over_from_the_dead_and_reaped(tmp_path: Path, monkeypatch) -> None:
    """`workdir(kind, name)`: the named dir, held with our pid in it. Held by a live compile, the
    same name waits for it (a second build's compile of the same TU then hits sccache's cache),
    and after `_NAMED_WAIT_S` takes a random dir; one left by a dead process is taken over. The
    reaper removes named dirs whose owner is gone, and owner-less ones older than 10 minutes; it
    keeps a live owner's and a new owner-less one."""
    import threading
    root = tc.safe_temp_root()
    name = "t" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]
    named = f"{root}/exps-sccache-{name}"
    monkeypatch.setattr(tc, "_NAMED_WAIT_S", 0.3)
    with tc.workdir("nvcc", name) as w1:
        assert w1 == named and Path(w1, sccache.OWNER_FILE).read_text() == str(os.getpid())
        with tc.workdir("nvcc", name) as w2:       # held all along: after 0.3 s, a random dir
            assert Path(w2).name.startswith(f"exps-nvcc-{os.getpid()}-")
        assert not os.path.exists(w2)
    assert not os.path.exists(w1)

    monkeypatch.setattr(tc, "_NAMED_WAIT_S", 30.0)
    got, held = [], threading.Event()

    def hold() -> None:
        with tc.workdir("nvcc", name):
            held.set()
            time.sleep(0.5)
    t = threading.Thread(target=hold)
    t.start()
    held.wait()
    t0 = time.monotonic()
    with tc.workdir("nvcc", name) as w3:           # waits for the holder, then gets the name
        got.append((w3, time.monotonic() - t0))
    t.join()
    assert got[0][0] == named and got[0][1] > 0.2

    dead = subprocess.Popen(["true"])
    dead.wait()
    os.mkdir(named)
    Path(named, sccache.OWNER_FILE).write_text(str(dead.pid))
    with tc.workdir("nvcc", name) as w4:           # a killed compile's: taken over at once
        assert w4 == named and Path(w4, sccache.OWNER_FILE).read_text() == str(os.getpid())
    assert not os.path.exists(named)

    gone = subprocess.Popen(["true"])
    gone.wait()
    made = {}
    for what, owner, age in (("dead", str(gone.pid), 0), ("live", str(os.getppid()), 0),
                             ("ownerless-old", None, 700), ("ownerless-new", None, 0)):
        d = tmp_path / f"exps-sccache-{what}"
        d.mkdir()
        if owner:
            (d / sccache.OWNER_FILE).write_text(owner)
        t = time.time() - age
        os.utime(d, (t, t))
        made[what] = str(d)
    assert sorted(tc.reap_stale_workdirs(tmp_path)) == sorted([made["dead"], made["ownerless-old"]])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exps-sccache-live", "exps-sccache-ownerless-new"]


def test_is_sccache() -> None:
    assert sccache.is_sccache(["sccache"]) and sccache.is_sccache(["/opt/x/bin/sccache", "-v"])
    assert not sccache.is_sccache([]) and not sccache.is_sccache(None)
    assert not sccache.is_sccache(["ccache"]) and not sccache.is_sccache(["sccache-dist"])


# ------------------------------------------------------------------ the farm's configs
def _jwt_payload(token: str, key: str) -> dict:
    """The payload of an HS256 JWT, after checking its signature with `key` (base64url)."""
    def unb64(s: str) -> bytes:
        return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    head, body, sig = token.split(".")
    assert json.loads(unb64(head)) == {"typ": "JWT", "alg": "HS256"}
    assert hmac.compare_digest(unb64(sig), hmac.new(unb64(key), f"{head}.{body}".encode(), hashlib.sha256).digest())
    return json.loads(unb64(body))


@requires("sccache")
def test_farm_configs(tmp_path: Path, capsys) -> None:
    """One scheduler, two servers, a client: the client's token is the scheduler's; each server's
    token is a JWT for its own address, signed with the scheduler's key; the files are 0600."""
    files = farm.configs("10.0.0.1:10600", ["10.0.0.2:10501", "10.0.0.3:10501"],
                         toolchains="/srv/tc", build_dir="/srv/build", client_toolchains="/home/u/tc")
    assert sorted(files) == ["client.conf", "scheduler.conf", "server-10.0.0.2-10501.conf",
                             "server-10.0.0.3-10501.conf"]
    conf = {n: tomllib.loads(t) for n, t in files.items()}
    sched, client = conf["scheduler.conf"], conf["client.conf"]
    assert sched["public_addr"] == "10.0.0.1:10600" and sched["client_auth"]["type"] == "token"
    assert client == {"dist": {"scheduler_url": "http://10.0.0.1:10600", "toolchains": [], "cache_dir": "/home/u/tc",
                               "auth": {"type": "token", "token": sched["client_auth"]["token"]}}}
    key = sched["server_auth"]["secret_key"]
    assert sched["server_auth"]["type"] == "jwt_hs256"
    for addr in ("10.0.0.2:10501", "10.0.0.3:10501"):
        srv = conf[f"server-{addr.replace(':', '-')}.conf"]
        assert {k: srv[k] for k in ("public_addr", "scheduler_url", "cache_dir")} == \
            {"public_addr": addr, "scheduler_url": "http://10.0.0.1:10600", "cache_dir": "/srv/tc"}
        assert srv["builder"] == {"type": "overlay", "build_dir": "/srv/build", "bwrap_path": "/usr/bin/bwrap"}
        assert srv["scheduler_auth"]["type"] == "jwt_token"
        assert _jwt_payload(srv["scheduler_auth"]["token"], key)["server_id"] == addr
    # a key that starts with '-' (1 in 64 of them) is a key, not an option of sccache-dist's
    dash = "-" + key[1:]
    assert _jwt_payload(farm.server_token(dash, "10.0.0.2:10501"), dash)["server_id"] == "10.0.0.2:10501"
    # fresh secrets every time
    again = tomllib.loads(farm.configs("10.0.0.1:10600", ["10.0.0.2:10501"])["scheduler.conf"])
    assert again["client_auth"]["token"] != sched["client_auth"]["token"] and again["server_auth"]["secret_key"] != key

    assert farm.main([str(tmp_path / "out"), "--scheduler", "10.0.0.1:10600", "--server", "10.0.0.2:10501"]) == 0
    assert sorted((p.name, p.stat().st_mode & 0o777) for p in (tmp_path / "out").iterdir()) == [
        ("client.conf", 0o600), ("scheduler.conf", 0o600), ("server-10.0.0.2-10501.conf", 0o600)]
    capsys.readouterr()
    for bad in (["--scheduler", "sched.local:10600", "--server", "10.0.0.2:10501"],
                ["--scheduler", "10.0.0.1:10600"],
                ["--scheduler", "10.0.0.1:10600", "--server", "10.0.0.2:99999"]):
        assert farm.main([str(tmp_path / "bad"), *bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("farm: error: ") and err.count("\n") == 1, err
    assert not (tmp_path / "bad").exists()


# ------------------------------------------------------------------ bench/farm.py's estimate
def test_bench_farm_estimate(tmp_path: Path) -> None:
    """The 100-AIR estimate of docs/BENCHMARKS.md from a run's figures: a made-up run of two AIRs
    whose every number is known, and the table it gives."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_farm", bk.REPO / "bench" / "farm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    calls = [(4.0, 4.1, "-keep --keep-dir exps_keep src/k1_qprobe.cu -o k1_qprobe.o"),
             (2.0, 2.1, "-Isrc src/k1_x0.cu -o k1_x0.o"), (0.1, 0.1, "-Isrc src/k1_abi.cpp -o k1_abi_cpp.o"),
             (2.0, 2.1, "-Isrc src/k2_q0_x0.cu -o k2_q0_x0.o"), (0.5, 0.5, "-shared 0/k1/obj/a.o -o k1.so")]
    run = {"meta": {"cores": 2}, "results": [
        {"way": "local1", "so": {"a": "1", "b": "2"}, "cpu_s": 12.0, "nvcc_calls": calls,
         "kernels": [{"key": "k1"}, {"key": "k2"}]},
        {"way": "dist2+", "cpu_by_process": {"build": 2.0, "sccache server": 1.0, "scheduler": 0.1, "server-0": 8.0},
         "sccache": {"compile_requests": 4}, "job_overhead": {"farm_wall_s": 0.6, "local_wall_s": 0.2}}]}
    (tmp_path / "farm.json").write_text(json.dumps(run))
    # servers 8 s per 8.6 s of nvcc CPU; client 1 s per AIR + 0.25 s per compile; chain k1: 4.4 + 2.4 s
    rows = [ln for ln in mod.estimate(tmp_path / "farm.json").splitlines() if ln.startswith("| 100")]
    assert rows == ["| 100 AIRs of this mix | 600 s | 25 s | 9 s | 9 s | servers / client / client |",
                    "| 100 AIRs like k1 | 770 s | 35 s | 9 s | 9 s | servers / client / client |"]
    assert "Longest chain: k1, 2 compiles, 6.0 s of CPU, 6.8 s through the farm." in mod.estimate(tmp_path / "farm.json")
