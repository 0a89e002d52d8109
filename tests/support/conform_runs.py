"""Running ``limbo conform`` for the tests: the real command against the gallery servers
(:mod:`support.conform_gallery`), over stdio or streamable HTTP, and reading what it wrote."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LIMBO = str(Path(sys.executable).parent / "limbo")
GALLERY = ROOT / "tests" / "support" / "conform_gallery.py"
PROBE = ROOT / "tests" / "support" / "conform_probe.py"
WORLD = ROOT / "tests" / "fixtures" / "conform" / "gallery.toml"
SCALE = "0.01"
"""Property 3 holds its timeout 30 s × 0.01 = 0.3 s."""


def stdio(flavour: str, db: Path) -> list[str]:
    return ["--upstream-cmd", f"{sys.executable} {GALLERY} {flavour} {db}"]


def probe(db: Path) -> list[str]:
    return ["--probe", f"{sys.executable} -S {PROBE} {db}"]


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str
    out: Path

    @property
    def report(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((self.out / "conform.json").read_text())
        return loaded

    def verdicts(self) -> dict[tuple[str, int], dict[str, Any]]:
        return {(v["tool"], v["property"]): v for v in self.report["verdicts"]}

    def records(self) -> dict[str, dict[str, Any]]:
        lines = (self.out / "episodes.jsonl").read_bytes().split(b"\n")[:-1]
        return {r["episode_id"]: r for r in map(json.loads, lines)}


def conform(out: Path, *args: str, timeout: float = 300, env: dict[str, str] | None = None
            ) -> Done:
    """``limbo conform ARGS --out OUT`` run to its end (``env``: added to the environment the
    command, and so a stdio server, gets)."""
    done = subprocess.run([LIMBO, "conform", *args, "--out", str(out)], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env={**os.environ, **(env or {})})
    return Done(done.returncode, done.stdout, done.stderr, out)


def rows(db: Path) -> dict[str, int]:
    """How many rows each effect table of a gallery database holds."""
    conn = sqlite3.connect(db)
    try:
        return {t: conn.execute(f"select count(*) from {t}").fetchone()[0]
                for t in ("charges", "emails")}
    finally:
        conn.close()


class HttpGallery:
    """A gallery server over streamable HTTP on a free loopback port."""

    def __init__(self, flavour: str, db: Path, *extra: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = subprocess.Popen(
            [sys.executable, str(GALLERY), flavour, str(db), "--http", str(self.port), *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        self.stop()
        raise AssertionError("the gallery server did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
