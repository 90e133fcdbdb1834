"""Kafka fixtures: one single-node KRaft broker for the session, helpers to make topics and produce."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from tests.servers import KafkaBroker, free_port, require_service

try:
    import confluent_kafka  # noqa: F401
except ImportError:  # pragma: no cover - the 'kafka' extra is part of 'dev'
    HAVE_CLIENT = False
else:
    HAVE_CLIENT = True


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """A single-node KRaft broker (broker and controller) on free loopback ports."""
    require_service(HAVE_CLIENT, "confluent-kafka is not installed (pip install 'weir[kafka]')")
    broker = KafkaBroker()
    try:
        broker.start()
        yield broker
    finally:
        broker.close()


def create_topic(
    bootstrap: str,
    partitions: int = 1,
    replication: int = 1,
    name: str | None = None,
    config: dict[str, str] | None = None,
) -> str:
    """Create a topic (random name unless given) and wait until it exists."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = name or f"t-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, partitions, replication, config=config or {})], operation_timeout=60, request_timeout=60
    )
    for f in futures.values():
        f.result(120)
    return topic


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes | str | None, bytes | str | None]],
    partition: int | None = None,
    headers: list[tuple[str, bytes]] | None = None,
) -> None:
    """Write ``(key, value)`` records (idempotent producer, acks=all) and wait for every ack."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors: list[str] = []

    def done(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for k, v in records:
        kw = {} if partition is None else {"partition": partition}
        p.produce(topic, key=k, value=v, headers=headers, on_delivery=done, **kw)
        p.poll(0)
    assert p.flush(120) == 0
    assert not errors, errors


# ---- a broker with a SASL_SSL listener (PLAIN over TLS) -------------------------------------------
SASL_USER, SASL_PASSWORD = "alice", "alice-s3cret-pw"


class SecureKafkaBroker(KafkaBroker):
    """A KRaft node with a second listener, ``SASL_SSL`` (mechanism PLAIN), on its own loopback port.

    The TLS key and a self-signed certificate for ``127.0.0.1`` are made with ``openssl`` and put in a
    PKCS12 keystore (``openssl pkcs12 -export``); clients trust the certificate (``ssl.ca.location``).
    The broker's own traffic (controller, inter-broker) stays on the PLAINTEXT listener.
    """

    def __init__(self, workdir: str | os.PathLike[str] | None = None) -> None:
        super().__init__(workdir)
        self.secure_port = free_port()
        self.ca_path = self.workdir / "ca.pem"
        self.keystore = self.workdir / "broker.p12"

    def make_certificate(self) -> None:
        """``openssl``: an RSA key and a self-signed certificate for 127.0.0.1/localhost, as PKCS12."""
        if self.keystore.exists():
            return
        key = self.workdir / "broker-key.pem"
        openssl = shutil.which("openssl") or "openssl"
        subprocess.run(
            [
                openssl,
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                str(key),
                "-out",
                str(self.ca_path),
                "-days",
                "2",
                "-subj",
                "/CN=localhost",
                "-addext",
                "subjectAltName=IP:127.0.0.1,DNS:localhost",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        subprocess.run(
            [
                openssl,
                "pkcs12",
                "-export",
                "-in",
                str(self.ca_path),
                "-inkey",
                str(key),
                "-out",
                str(self.keystore),
                "-passout",
                "pass:keystore-pw",
                "-name",
                "broker",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def write_config(self) -> None:
        """The PLAINTEXT node's config plus a ``SASL_SSL`` listener with users admin and alice."""
        self.make_certificate()
        super().write_config()
        lines = self.config_path.read_text().splitlines()
        props = dict(line.split("=", 1) for line in lines)
        props["listeners"] += f",SASL_SSL://127.0.0.1:{self.secure_port}"
        props["advertised.listeners"] += f",SASL_SSL://127.0.0.1:{self.secure_port}"
        props["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL"
        props.update(
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_ssl.plain.sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="admin" password="admin-pw" user_admin="admin-pw" user_{SASL_USER}="{SASL_PASSWORD}";'
                ),
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(self.keystore),
                "ssl.keystore.password": "keystore-pw",
                "ssl.key.password": "keystore-pw",
            }
        )
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    @property
    def secure_bootstrap(self) -> str:
        """``127.0.0.1:PORT`` of the SASL_SSL listener."""
        return f"127.0.0.1:{self.secure_port}"

    def client_config(self, password: str = SASL_PASSWORD) -> dict[str, str]:
        """What a client passes through to reach the SASL_SSL listener as alice."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": SASL_USER,
            "sasl.password": password,
            "ssl.ca.location": str(self.ca_path),
        }


@pytest.fixture(scope="session")
def secure_kafka_broker() -> Iterator[SecureKafkaBroker]:
    """A single-node KRaft broker with a SASL_SSL (PLAIN) listener beside its PLAINTEXT one."""
    require_service(HAVE_CLIENT, "confluent-kafka is not installed (pip install 'weir[kafka]')")
    require_service(shutil.which("openssl") is not None, "openssl is not installed")
    broker = SecureKafkaBroker()
    try:
        broker.start()
        yield broker
    finally:
        broker.close()
