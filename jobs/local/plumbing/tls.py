"""The local platform's TLS: a CA of its own and the gRPC server's certificate for 127.0.0.1 and
localhost, in ``DATA_DIR/tls`` (0700, files 0600: the user's alone).

The SDK opens secure gRPC channels only, so the gRPC endpoint needs a certificate a client can
check: the CA's (``ca.pem``), which `vtx local env` hands to gRPC as
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``. The CA's private key is never written: it signs the server
certificate once and is dropped, so nothing can later mint another certificate this CA vouches
for. The pair is kept across restarts (a shell's exported CA stays good) and made again, CA and
all, when the server certificate is near its end or a file is missing. ``cryptography`` is
imported where certificates are made or read: `vtx --help` loads this module (processes.py).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.local.platform.state import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE

if TYPE_CHECKING:
    from cryptography import x509

TLS_DIR = "tls"
CA_FILE = "ca.pem"
CERT_FILE = "server.pem"
KEY_FILE = "server-key.pem"
VALIDITY = datetime.timedelta(days=397)
"""The longest a publicly trusted server certificate may live (CA/Browser Forum); also the CA's."""
RENEW_BEFORE = datetime.timedelta(days=30)
SERVER_NAMES = ("localhost",)
SERVER_ADDRESSES = ("127.0.0.1",)


@dataclass(frozen=True)
class TlsFiles:
    """Where the CA and the server's certificate and key are."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / CA_FILE

    @property
    def cert(self) -> Path:
        return self.directory / CERT_FILE

    @property
    def key(self) -> Path:
        return self.directory / KEY_FILE


def tls_files(data_dir: Path) -> TlsFiles:
    return TlsFiles(data_dir / TLS_DIR)


def ensure_certificates(data_dir: Path) -> TlsFiles:
    """The data dir's CA and server certificate, made when missing or near their end."""
    files = tls_files(data_dir)
    if not _still_good(files):
        _make(files)
    return files


def _still_good(files: TlsFiles) -> bool:
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
        files.ca.stat()
        files.key.stat()
    except (OSError, ValueError):
        return False
    return cert.not_valid_after_utc - _now() > RENEW_BEFORE


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _name(common_name: str) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _make(files: TlsFiles) -> None:
    """A CA, and a server certificate it signs; the CA's key is dropped."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    files.directory.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    files.directory.chmod(PRIVATE_DIR_MODE)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    server_key = ec.generate_private_key(ec.SECP256R1())
    start, end = _now() - datetime.timedelta(minutes=5), _now() + VALIDITY
    ca_name = _name(f"vtx local platform CA ({os.getuid()}@{files.directory})"[:64])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVER_NAMES]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in SERVER_ADDRESSES]
    server = (
        x509.CertificateBuilder()
        .subject_name(_name("vtx local platform"))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = server_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    _write_private(files.key, key_pem)
    _write_private(files.cert, server.public_bytes(serialization.Encoding.PEM))
    _write_private(files.ca, ca.public_bytes(serialization.Encoding.PEM))


def _key_usage(ca: bool) -> x509.KeyUsage:
    from cryptography import x509

    return x509.KeyUsage(
        digital_signature=not ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _write_private(path: Path, data: bytes) -> None:
    """Atomically, readable by the user only."""
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    tmp.replace(path)
