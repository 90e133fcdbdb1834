"""A loopback TCP proxy that injects network faults between weir and a store or broker.

``with FaultProxy(port) as proxy:`` listens on ``127.0.0.1:proxy.port`` and forwards every
connection to ``127.0.0.1:port``. While it runs:

- :meth:`delay` adds a latency to every chunk forwarded (both directions);
- :meth:`blackhole` keeps every connection open but forwards nothing (bytes are held back, as a
  network path that stops delivering does), and accepts new connections without connecting them
  on; :meth:`restore` delivers again;
- :meth:`cut` closes every open connection at once (a reset middlebox, a restarted load balancer);
  new connections work.

Used by ``bench/faults.py`` and its CI test. One thread accepts, two per connection pump.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

__all__ = ["FaultProxy"]


class FaultProxy:
    """Forward ``127.0.0.1:<port>`` to ``target``, with delays, black holes and cuts (see the module docs)."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._flowing = threading.Event()
        self._flowing.set()
        self._delay_s = 0.0
        self._closed = False
        self.cuts = 0
        self._thread = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- faults ------------------------------------------------------------------------------
    def delay(self, seconds: float) -> None:
        """Delay every forwarded chunk by ``seconds`` (0 = none)."""
        self._delay_s = max(0.0, seconds)

    def blackhole(self) -> None:
        """Forward nothing from now on; connections stay open."""
        self._flowing.clear()

    def restore(self) -> None:
        """Forward again (held bytes are delivered), without delay."""
        self._delay_s = 0.0
        self._flowing.set()

    def cut(self) -> int:
        """Close every open connection; return how many there were."""
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        self.cuts += 1
        return len(socks) // 2

    def close(self) -> None:
        """Stop listening and close every connection."""
        self._closed = True
        self._flowing.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()

    # ---- forwarding --------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        while not self._flowing.wait(0.1):  # a black hole: the connection is accepted, never connected on
            if self._closed:
                client.close()
                return
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            self._socks += [client, upstream]
        for src, dst in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                while not self._flowing.wait(0.1):
                    if self._closed:
                        return
                if self._delay_s:
                    time.sleep(self._delay_s)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
