"""A line at least every `EXPS_HEARTBEAT_S` seconds (default 30) while a long task runs.

    with Heartbeat("tune basic_a0_2_b5_e5722") as hb:
        hb.status("probe 2 of at most 6 (chunk 128)")
        ...

prints to stderr (doit shows an action's stderr while it runs):
    ... tune basic_a0_2_b5_e5722: probe 2 of at most 6 (chunk 128), 30 s elapsed
"""
from __future__ import annotations

import sys
import threading
import time

from codegen.build import knobs


def interval() -> float:
    try:
        return knobs.read().heartbeat_s
    except knobs.KnobError:
        return knobs.DEFAULT_HEARTBEAT_S


class Heartbeat:
    def __init__(self, label: str, every: float | None = None, out=None) -> None:
        self.label = label
        self.every = interval() if every is None else every
        self.out = out or sys.stderr
        self._status = "working"
        self._stop = threading.Event()
        self._lock = threading.Lock()    # a line is written whole, and never after __exit__
        self._t0 = time.monotonic()
        self._thread: threading.Thread | None = None

    def status(self, text: str) -> None:
        self._status = text

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            with self._lock:
                if self._stop.is_set():       # stopped between the wait and the lock
                    return
                try:
                    self.out.write(f"    ... {self.label}: {self._status}, "
                                   f"{time.monotonic() - self._t0:.0f} s elapsed\n")
                    self.out.flush()
                except (OSError, ValueError):
                    return

    def __enter__(self) -> "Heartbeat":
        self._thread = threading.Thread(target=self._run, daemon=True, name="exps-heartbeat")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._stop.set()

