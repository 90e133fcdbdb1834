"""A loopback TCP proxy that can be frozen: the server behind it looks alive but never answers.

``with PausableProxy(port) as proxy: ...; proxy.pause()`` — after ``pause()`` the proxy keeps every
connection open (and the kernel keeps ACKing) but forwards nothing in either direction, which is
what a client sees of a stopped (SIGSTOP) server or a paused VM. ``resume()`` forwards again.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

__all__ = ["PausableProxy"]


class PausableProxy:
    """Forward ``127.0.0.1:<port>`` to ``target``; :meth:`pause` stops forwarding (see the module docs)."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._running = threading.Event()
        self._running.set()
        self._stop = False
        self._socks: list[socket.socket] = []
        self._thread = threading.Thread(target=self._loop, name="pausable-proxy", daemon=True)

    def __enter__(self) -> PausableProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pause(self) -> None:
        """Forward nothing from now on (connections stay open)."""
        self._running.clear()

    def resume(self) -> None:
        """Forward again."""
        self._running.set()

    def close(self) -> None:
        """Stop the proxy and close every connection."""
        self._stop = True
        self._running.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        for s in self._socks:
            with contextlib.suppress(OSError):
                s.close()
        self._thread.join(5)

    def _loop(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ, None)
        while not self._stop:
            if not self._running.is_set():
                self._running.wait(0.05)
                continue
            try:
                events = sel.select(0.05)
            except (OSError, ValueError):
                return
            for key, _ in events:
                if not self._running.is_set():
                    break
                if key.data is None:
                    try:
                        client, _ = self._listener.accept()
                        upstream = socket.create_connection(self.target, timeout=5)
                    except OSError:
                        continue
                    self._socks += [client, upstream]
                    sel.register(client, selectors.EVENT_READ, upstream)
                    sel.register(upstream, selectors.EVENT_READ, client)
                    continue
                src: socket.socket = key.fileobj  # type: ignore[assignment]
                dst: socket.socket = key.data
                try:
                    data = src.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    for s in (src, dst):
                        with contextlib.suppress(KeyError, ValueError):
                            sel.unregister(s)
                        with contextlib.suppress(OSError):
                            s.close()
                    continue
                with contextlib.suppress(OSError):
                    dst.sendall(data)
