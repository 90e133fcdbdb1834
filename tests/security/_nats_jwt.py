"""NATS decentralized auth for the tests: operator, account and user NKeys and JWTs signed here.

There is no ``nsc`` on the test machines, so the JWTs are made with the ``nkeys`` library in NATS's
v2 claims format: a header ``{"typ": "JWT", "alg": "ed25519-nkey"}``, claims with ``jti`` (the
base32 SHA-512/256 of the claims without it), ``iat``, ``iss`` (the signer's public key), ``sub``
(the subject's public key), ``name`` and ``nats`` (type-specific claims, ``version: 2``), and an
ed25519 signature of ``header.claims`` by the issuer's seed, all base64url without padding.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nkeys

__all__ = ["Identity", "OperatorSetup", "creds_file_text", "make_operator_setup"]

_UNLIMITED = -1


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class Identity:
    """An NKey pair: ``seed`` (secret, ``S...``) and ``public`` (``O...``, ``A...`` or ``U...``)."""

    seed: bytes
    public: str

    @classmethod
    def new(cls, prefix: int) -> Identity:
        seed = nkeys.encode_seed(os.urandom(32), prefix)
        return cls(seed, nkeys.from_seed(bytearray(seed)).public_key.decode("ascii"))

    def sign_jwt(self, subject: str, name: str, nats: dict[str, Any]) -> str:
        """A JWT with ``claims`` about ``subject``, issued and signed by this identity."""
        header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}, separators=(",", ":")).encode())
        claims: dict[str, Any] = {"iat": int(time.time()), "iss": self.public, "name": name, "sub": subject}
        claims["nats"] = {**nats, "version": 2}
        digest = hashlib.new("sha512_256", json.dumps(claims, separators=(",", ":")).encode()).digest()
        claims["jti"] = base64.b32encode(digest).decode("ascii").rstrip("=")
        body = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = nkeys.from_seed(bytearray(self.seed)).sign(f"{header}.{body}".encode())
        return f"{header}.{body}.{_b64(signature)}"


def creds_file_text(user_jwt: str, user_seed: bytes) -> str:
    """The ``.creds`` file ``nsc`` writes: the user JWT and the user's NKey seed."""
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{user_jwt}\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{user_seed.decode('ascii')}\n"
        "------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )


@dataclass(frozen=True)
class OperatorSetup:
    """An operator, a JetStream-enabled account and a user of it; the server config and creds file."""

    operator_jwt: str
    account: Identity
    account_jwt: str
    user: Identity
    user_jwt: str
    system: Identity
    system_jwt: str

    def server_conf(self, port: int, store_dir: Path) -> str:
        """nats-server config: operator mode, a memory resolver preloaded with both accounts."""
        return (
            f"listen: 127.0.0.1:{port}\n"
            f"operator: {self.operator_jwt}\n"
            f"system_account: {self.system.public}\n"
            "resolver: MEMORY\n"
            "resolver_preload: {\n"
            f"  {self.account.public}: {self.account_jwt}\n"
            f"  {self.system.public}: {self.system_jwt}\n"
            "}\n"
            f'jetstream {{ store_dir: "{store_dir}" }}\n'
        )

    def user_creds(self) -> str:
        """The user's ``.creds`` file."""
        return creds_file_text(self.user_jwt, self.user.seed)


def make_operator_setup() -> OperatorSetup:
    """Fresh keys and JWTs: operator → account (JetStream unlimited) → user; plus a system account."""
    operator = Identity.new(nkeys.PREFIX_BYTE_OPERATOR)
    account = Identity.new(nkeys.PREFIX_BYTE_ACCOUNT)
    system = Identity.new(nkeys.PREFIX_BYTE_ACCOUNT)
    user = Identity.new(nkeys.PREFIX_BYTE_USER)
    limits = {
        "subs": _UNLIMITED, "data": _UNLIMITED, "payload": _UNLIMITED, "imports": _UNLIMITED,
        "exports": _UNLIMITED, "wildcards": True, "conn": _UNLIMITED, "leaf": _UNLIMITED,
    }  # fmt: skip
    js = {"mem_storage": _UNLIMITED, "disk_storage": _UNLIMITED, "streams": _UNLIMITED, "consumer": _UNLIMITED}
    operator_jwt = operator.sign_jwt(operator.public, "weir-test-operator", {"type": "operator"})
    account_jwt = operator.sign_jwt(
        account.public, "APP", {"type": "account", "limits": {**limits, **js}, "default_permissions": {}}
    )
    system_jwt = operator.sign_jwt(system.public, "SYS", {"type": "account", "limits": limits})
    user_jwt = account.sign_jwt(
        user.public,
        "reader",
        {"type": "user", "pub": {}, "sub": {}, "subs": _UNLIMITED, "data": _UNLIMITED, "payload": _UNLIMITED},
    )
    return OperatorSetup(operator_jwt, account, account_jwt, user, user_jwt, system, system_jwt)
