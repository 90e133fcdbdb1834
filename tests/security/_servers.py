"""Servers with passwords and TLS for the security tests, and test certificates made with ``openssl``."""

from __future__ import annotations

import socket
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.servers import NatsServer, RedisReplyError, RedisServer, free_port, redis_command, require_binary

__all__ = ["Certs", "OperatorNats", "PasswordRedis", "TlsNats", "TlsRedis", "make_certs"]


@dataclass(frozen=True)
class Certs:
    """PEM files: a CA, a server certificate for 127.0.0.1/localhost and a client certificate."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run([require_binary("openssl"), *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certs(directory: Path) -> Certs:
    """A throw-away CA signing a server and a client certificate (EC keys: fast to make)."""
    d = directory
    ext = d / "server.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    cext = d / "client.ext"
    cext.write_text("extendedKeyUsage=clientAuth\n")
    for name in ("ca", "other-ca"):
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key", cwd=d)
        _openssl(
            "req",
            "-x509",
            "-new",
            "-key",
            f"{name}.key",
            "-days",
            "2",
            "-subj",
            f"/CN=weir test {name}",
            "-out",
            f"{name}.pem",
            cwd=d,
        )
    for name, extfile in (("server", ext), ("client", cext)):
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{name}.key", cwd=d)
        _openssl("req", "-new", "-key", f"{name}.key", "-subj", f"/CN=weir test {name}", "-out", f"{name}.csr", cwd=d)
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            str(extfile),
            "-out",
            f"{name}.pem",
            cwd=d,
        )
    return Certs(
        d / "ca.pem", d / "server.pem", d / "server.key", d / "client.pem", d / "client.key", d / "other-ca.pem"
    )


class PasswordRedis(RedisServer):
    """A Redis that requires a password; ready when it answers (NOAUTH counts as an answer)."""

    def ready(self) -> bool:
        """PING answers, with PONG or a NOAUTH error."""
        try:
            return bool(redis_command(self.port, "PING", timeout=1) == "PONG")
        except RedisReplyError as exc:
            return "NOAUTH" in str(exc)


class TlsRedis(RedisServer):
    """Redis serving TLS only (``--port 0 --tls-port P``), requiring client certificates."""

    def __init__(self, workdir: Path, certs: Certs) -> None:
        self.certs = certs
        super().__init__(workdir)
        self.tls_port = free_port()

    def command(self) -> list[str]:
        """redis-server with a TLS port, the plain port off and client certificates required."""
        cmd = super().command()
        cmd[cmd.index("--port") + 1] = "0"
        return cmd + [
            "--tls-port", str(self.tls_port),
            "--tls-cert-file", str(self.certs.server_cert),
            "--tls-key-file", str(self.certs.server_key),
            "--tls-ca-cert-file", str(self.certs.ca),
            "--tls-auth-clients", "yes",
        ]  # fmt: skip

    def ready(self) -> bool:
        """A TLS handshake with the client certificate succeeds and PING answers."""
        ctx = ssl.create_default_context(cafile=str(self.certs.ca))
        ctx.load_cert_chain(str(self.certs.client_cert), str(self.certs.client_key))
        with (
            socket.create_connection(("127.0.0.1", self.tls_port), timeout=1) as raw,
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s,
        ):
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")

    @property
    def url(self) -> str:
        """``rediss://127.0.0.1:TLS_PORT/0``."""
        return f"rediss://127.0.0.1:{self.tls_port}/0"


class TlsNats(NatsServer):
    """nats-server with TLS (verifying client certificates) and extra config (users, nkeys)."""

    def __init__(self, workdir: Path, certs: Certs, extra_conf: str = "", *, verify_clients: bool = True) -> None:
        super().__init__(workdir)
        self.certs = certs
        self.conf_file = Path(workdir) / "nats.conf"
        verify = "true" if verify_clients else "false"
        self.conf_file.write_text(
            f"listen: 127.0.0.1:{self.port}\n"
            f"tls {{\n  cert_file: {json_str(certs.server_cert)}\n  key_file: {json_str(certs.server_key)}\n"
            f"  ca_file: {json_str(certs.ca)}\n  verify: {verify}\n  timeout: 5\n}}\n"
            f"jetstream {{ store_dir: {json_str(self.store_dir)} }}\n" + extra_conf
        )

    def command(self) -> list[str]:
        """nats-server -c CONF."""
        return [self.binary, "-c", str(self.conf_file)]

    def ready(self) -> bool:
        """The server greets with an ``INFO`` line that asks for TLS."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
            greeting = s.recv(4096)
        return greeting.startswith(b"INFO ") and b'"tls_required":true' in greeting

    @property
    def url(self) -> str:
        """``tls://127.0.0.1:PORT``."""
        return f"tls://127.0.0.1:{self.port}"


def json_str(path: object) -> str:
    """A double-quoted string for the nats-server config file."""
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


class OperatorNats(NatsServer):
    """nats-server with JetStream in operator mode (decentralized JWT auth, memory resolver).

    ``conf`` is the whole config file (see :meth:`tests.security._nats_jwt.OperatorSetup.server_conf`).
    """

    def __init__(self, workdir: Path, make_conf: object) -> None:
        super().__init__(workdir)
        self.conf_file = Path(workdir) / "nats.conf"
        self.conf_file.write_text(make_conf(self.port, self.store_dir))  # type: ignore[operator]

    def command(self) -> list[str]:
        """nats-server -c CONF."""
        return [self.binary, "-c", str(self.conf_file)]

    def ready(self) -> bool:
        """The server greets with an ``INFO`` line asking for auth, JetStream on."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
            greeting = s.recv(4096)
        return greeting.startswith(b"INFO ") and b'"auth_required":true' in greeting
