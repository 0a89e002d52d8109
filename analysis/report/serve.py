"""``limbo view``: the report served on 127.0.0.1, rebuilt while the runs are still being written.

A watcher looks at the record files (names, sizes, modification times) once a second; when they
changed it rebuilds the site through the same loader and swaps it in, and the version it
reports at ``api/version`` goes up. The pages poll that address when they are served (never
from ``file://``) and refresh their data in place.

Only the loopback address is bound, and a request whose ``Host`` is not this server's is
refused, so a web page elsewhere cannot read the report through DNS rebinding. The site is a
starlette app served by uvicorn (the ``analysis`` extra brings both).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from limbo.analysis.loader import record_files
from limbo.analysis.report.site import Site, build, waiting
from limbo.analysis.runs import Fallback
from limbo.base.errors import UsageError
from limbo.base.sockets import listening

TYPES = {"html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8",
         "css": "text/css; charset=utf-8", "png": "image/png", "svg": "image/svg+xml",
         "json": "application/json"}


def signature(paths: Sequence[Path]) -> tuple[tuple[str, int, int], ...]:
    """What changes when a run gains episodes (or a manifest is rewritten)."""
    found = []
    for given in paths:
        folder = given if given.is_dir() else given.parent
        for path in [*record_files(given), *sorted(folder.glob("manifest*.json"))]:
            try:
                st = path.stat()
            except OSError:
                continue
            found.append((str(path), st.st_size, st.st_mtime_ns))
    return tuple(found)


class Live:
    """The current site of ``paths``, rebuilt when their files change."""

    def __init__(self, paths: Sequence[Path], weighting: str,
                 fallback: Fallback | None = None) -> None:
        self.paths, self.weighting, self.fallback = list(paths), weighting, fallback
        self._signature = signature(self.paths)
        self.site = self._build(0)
        self._buckets: dict[tuple[int, int], bytes] = {}

    def _build(self, version: int) -> Site:
        try:
            return build(self.paths, self.weighting, version, self.fallback)
        except UsageError as exc:
            return waiting(self.paths, str(exc), version)

    def refresh(self) -> bool:
        """Rebuild if the files changed since the last build; whether it did."""
        now = signature(self.paths)
        if now == self._signature:
            return False
        self._signature = now
        self.site = self._build(self.site.version + 1)
        self._buckets.clear()
        return True

    def watch(self, stop: threading.Event, every_s: float = 1.0) -> None:
        """Refresh every ``every_s`` until ``stop``; a failure is reported once (not every
        second) and the last good site stays up."""
        said = ""
        while not stop.wait(every_s):
            try:
                self.refresh()
                said = ""
            except Exception as exc:  # noqa: BLE001 - keep serving the last good site
                why = f"{type(exc).__name__}: {exc}"
                if why != said:
                    print(f"limbo view: could not rebuild ({why}); still serving version "
                          f"{self.site.version}", file=sys.stderr, flush=True)
                said = why

    def get(self, name: str) -> bytes | None:
        site = self.site
        if name == "api/version":
            return json.dumps({"version": site.version, "episodes": site.episodes}).encode()
        if name.startswith("episodes/b") and name.endswith(".js"):
            try:
                number = int(name[len("episodes/b"):-3])
            except ValueError:
                return None
            key = (site.version, number)
            if key not in self._buckets:
                data = site.bucket(number)
                if data is None:
                    return None
                self._buckets[key] = data
            return self._buckets[key]
        return site.files.get(name)


PLAIN = "text/plain; charset=utf-8"


def app(live: Live, allowed_hosts: set[str]) -> Any:
    """The site as a starlette app: every GET is one file of ``live``'s current site."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    def send(status: int, data: bytes, kind: str) -> Response:
        return Response(data, status, {"Cache-Control": "no-store",
                                       "X-Content-Type-Options": "nosniff"}, kind)

    def page(request: Request) -> Response:  # sync: starlette runs it on a worker thread
        if request.headers.get("host", "") not in allowed_hosts:
            return send(403, b"unknown Host\n", PLAIN)
        name = request.path_params["name"] or "index.html"
        try:
            data = live.get(name)
        except Exception as exc:  # noqa: BLE001 - one line for the user, never a traceback
            client = request.client.host if request.client else "?"
            print(f"limbo view: a request from {client} failed ({type(exc).__name__}: {exc})",
                  file=sys.stderr, flush=True)
            return send(500, b"internal error\n", PLAIN)
        if data is None:
            return send(404, b"not found\n", PLAIN)
        return send(200, data, TYPES.get(name.rsplit(".", 1)[-1], TYPES["json"]))

    return Starlette(routes=[Route("/{name:path}", page, methods=["GET"])])


def serve(paths: Sequence[Path], weighting: str, port: int, announce: Any = print,
          fallback: Fallback | None = None) -> None:
    """Serve until interrupted; ``announce`` gets the address once the socket is bound.

    uvicorn serves the starlette app through its public ``Config`` and ``Server.run``; a client
    that resets its connection is uvicorn's business and prints nothing. Ctrl-C stops it
    (uvicorn takes SIGINT while it serves, shuts down, and hands the signal back)."""
    try:
        import uvicorn
    except ImportError:
        raise UsageError("limbo view needs uvicorn and starlette: "
                         "pip install 'limbo-bench[analysis]'") from None
    sock = listening(port, "--port")
    try:
        live = Live(paths, weighting, fallback)
    except BaseException:
        sock.close()
        raise
    bound = sock.getsockname()[1]
    site = app(live, {f"127.0.0.1:{bound}", f"localhost:{bound}"})
    config = uvicorn.Config(site, lifespan="off", log_level="critical", access_log=False,
                            server_header=False, timeout_graceful_shutdown=1)
    stop = threading.Event()
    watcher = threading.Thread(target=live.watch, args=(stop,), daemon=True)
    watcher.start()
    announce(f"limbo view: http://127.0.0.1:{bound}/ ({live.site.episodes} episodes from "
             f"{', '.join(map(str, paths))}; new episodes appear as they are written; Ctrl-C "
             f"stops)")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        sock.close()
