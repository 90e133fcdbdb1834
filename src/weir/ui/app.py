"""The ``weir ui`` web application (Starlette) and a server to run it (uvicorn).

Routes (all ``GET``; the app has no route that writes):

* ``/`` — the topologies in the store (straight to the one when ``topology`` is given);
* ``/t/<topology>`` — the topology's page; ``/t/<topology>/body`` — its body, for the refresh;
* ``/api/topologies`` and ``/api/topologies/<topology>`` — the same data as JSON.

Every request's ``Host`` header must name this server (:func:`allowed_hosts`): a page on another
site that rebinds its DNS name to ``127.0.0.1`` (DNS rebinding) gets ``400 Invalid host header``
instead of the store's contents.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from weir.errors import ConfigError
from weir.ui.data import StoreReader
from weir.ui.render import body_html, index_html, page_html

__all__ = ["UiServer", "allowed_hosts", "create_app"]

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")


def allowed_hosts(bind: str, extra: Iterable[str] = ()) -> list[str]:
    """The ``Host`` header names a server bound to ``bind`` answers (ports aside).

    Loopback names always; the bound address itself; for a bind-all address (``0.0.0.0``,
    ``::``) also this machine's host name and fully qualified name; and ``extra`` (``--allowed-host``,
    e.g. the name of a reverse proxy). Any other name is refused.
    """
    names = [*_LOOPBACK_NAMES]
    if bind not in ("0.0.0.0", "::", ""):  # noqa: S104 - compared, not bound
        names.append(bind)
    else:
        names += [socket.gethostname(), socket.getfqdn()]
    names += [h for h in extra if h]
    return list(dict.fromkeys(n.lower() for n in names))


def create_app(
    reader: StoreReader,
    *,
    topology: str | None = None,
    refresh_s: float = 2.0,
    hosts: Iterable[str] | None = None,
) -> Any:
    """The Starlette application over ``reader``; ``hosts``: the accepted ``Host`` names (default loopback)."""
    try:
        from starlette.applications import Starlette
        from starlette.middleware import Middleware
        from starlette.middleware.trustedhost import TrustedHostMiddleware
        from starlette.requests import Request
        from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
        from starlette.routing import Route
    except ImportError as exc:
        msg = "weir ui needs starlette and uvicorn; pip install 'weir[ui]'"
        raise ConfigError(msg) from exc

    def index(request: Request) -> Response:
        if topology is not None:
            return RedirectResponse(f"/t/{quote(topology, safe='')}", status_code=307)
        names = reader.topologies()
        return HTMLResponse(page_html("topologies", index_html(reader.where, names), 0))

    def missing(name: str) -> Response:
        return HTMLResponse(
            page_html(
                name, f"<main><section class='wide'><p>No topology {name!r} in this store.</p></section></main>", 0
            ),
            status_code=404,
        )

    def page(request: Request) -> Response:
        name = request.path_params["name"]
        snap = reader.snapshot(name)
        if snap is None:
            return missing(name)
        return HTMLResponse(page_html(name, body_html(snap), refresh_s))

    def body(request: Request) -> Response:
        name = request.path_params["name"]
        snap = reader.snapshot(name)
        if snap is None:
            return HTMLResponse("", status_code=404)
        return HTMLResponse(body_html(snap), headers={"Cache-Control": "no-store"})

    def api_list(request: Request) -> Response:
        return JSONResponse({"store": reader.where, "topologies": reader.topologies()})

    def api_one(request: Request) -> Response:
        snap = reader.snapshot(request.path_params["name"])
        if snap is None:
            return JSONResponse({"error": "no such topology"}, status_code=404)
        return JSONResponse(snap.to_json())

    return Starlette(
        routes=[
            Route("/", index),
            Route("/t/{name}", page),
            Route("/t/{name}/body", body),
            Route("/api/topologies", api_list),
            Route("/api/topologies/{name}", api_one),
        ],
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts or allowed_hosts("127.0.0.1"))),
        ],
    )


class UiServer:
    """Serves :func:`create_app` with uvicorn, in this thread (:meth:`run`) or a daemon thread (:meth:`start`)."""

    def __init__(
        self,
        reader: StoreReader,
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        topology: str | None = None,
        refresh_s: float = 2.0,
        extra_hosts: Iterable[str] = (),
    ) -> None:
        try:
            import uvicorn
        except ImportError as exc:
            msg = "weir ui needs starlette and uvicorn; pip install 'weir[ui]'"
            raise ConfigError(msg) from exc
        app = create_app(reader, topology=topology, refresh_s=refresh_s, hosts=allowed_hosts(host, extra_hosts))
        self.config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
        self.server = uvicorn.Server(self.config)
        self.host = host
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the chosen one when 0 was asked for)."""
        for s in getattr(self.server, "servers", []) or []:
            for sock in s.sockets:
                return int(sock.getsockname()[1])
        return int(self.config.port)

    @property
    def url(self) -> str:
        """The page's address."""
        return f"http://{self.host}:{self.port}/"

    def run(self) -> None:
        """Serve until interrupted."""
        self.server.run()

    def start(self, timeout: float = 30.0) -> UiServer:
        """Serve in a daemon thread; return once it listens."""
        self._thread = threading.Thread(target=self.server.run, name="weir-ui", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                msg = f"weir ui could not listen on {self.host}:{self.config.port}"
                raise ConfigError(msg)
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        """Stop serving."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
