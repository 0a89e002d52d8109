"""``limbo view`` serves on: a client that resets its connection mid-answer prints nothing (no
traceback), and the server keeps answering the next requests."""

from __future__ import annotations

import re
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from limbo.cli import main

LIMBO = str(Path(sys.executable).parent / "limbo")


def test_a_client_that_resets_its_connection_is_no_traceback(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["run", "--template", "charge_invoice", "--quiet", "--out", str(run)]) == 0
    proc = subprocess.Popen([LIMBO, "view", str(run)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(re.search(r"127\.0\.0\.1:(\d+)", proc.stdout.readline()).group(1))
        for _ in range(20):  # ask for the page, then hang up with a reset (SO_LINGER 0)
            client = socket.create_connection(("127.0.0.1", port))
            client.sendall(f"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
                           .encode())
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()
        time.sleep(0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/version", timeout=30) as r:
            assert b'"episodes"' in r.read()  # still serving
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "Exception" not in err, err
    assert proc.returncode == 0
