"""Who may talk to the local platform: pure checks shared by the control plane (an ASGI
middleware in server.py) and the GCS emulator (storage/gcs_emulator.py). What a GCS name may
be is jobs/core/gcs_names.py's.

The control plane runs whatever command a job names, so a request it should not serve is code
execution on the developer's machine. The rules, each against one way in:
- a web page the developer has open (cross-site POST, ``fetch`` with ``no-cors``): browsers
  mark every such request with ``Origin`` or ``Sec-Fetch-Site``; the SDKs, gcsfs and curl send
  neither, so any request carrying one is refused;
- DNS rebinding (a page whose host name later resolves to 127.0.0.1): the browser still sends
  its own name in ``Host``, so only the loopback address (or ``localhost``) with the port the
  server was started on is served;
- a body a browser can send without a preflight (``text/plain``, forms): the control plane
  takes JSON bodies only, at most ``MAX_BODY_BYTES``;
- another user of the machine: on Linux the kernel says which user owns the client's end of
  a loopback connection (asked for that one socket over sock_diag netlink, as `ss` does; its
  socket table as a fallback), and only the user who started the platform is served.
  This guards every route, the JobService's too, without asking anything of the client: the
  real SDK, gcsfs and the user's own code work unchanged. (Elsewhere there is no such table.)
- another program of the same user: the vtx-only endpoints (logs, preemption) also want the
  platform's token from ``state.json`` (mode 0600), as Jupyter does. The JobService routes
  cannot: the real SDK has no way to send one, and that program could run what it likes anyway.
"""

from __future__ import annotations

import errno
import hmac
import os
import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_BODY_BYTES = 1 << 20
"""Largest request body the control plane reads; a CustomJob is a few KiB."""
LOOPBACK_NAMES = ("127.0.0.1", "localhost")
BROWSER_HEADERS = ("origin", "sec-fetch-site")
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
SOCKET_TABLE = Path("/proc/net/tcp")
LOOPBACK_HEX = "0100007F"
"""127.0.0.1 as the socket table writes it (little-endian hex)."""
# sock_diag (linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h): an exact lookup of one
# socket by its addresses and ports in an inet_diag_req_v2; the answer is an inet_diag_msg.
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_ALL_TCP_STATES = 0xFFFFFFFF
_INET_DIAG_NOCOOKIE = 0xFFFFFFFF
_LOOPBACK_ID = socket.inet_aton("127.0.0.1") + bytes(12)
"""An address in inet_diag_sockid: 16 bytes, IPv4 in the first 4."""
_UID_OFFSET = 16 + 4 + 48 + 12
"""nlmsghdr, then inet_diag_msg: family/state/timer/retrans, the 48-byte sockid, expires,
rqueue and wqueue, then idiag_uid."""


@dataclass(frozen=True)
class Refusal:
    """Why a request is not served: an HTTP code, Google's status name and a message."""

    http_code: int
    status: str
    message: str


def error_body(http_code: int, message: str, status: str) -> dict[str, Any]:
    """Google's JSON error shape, which google.api_core (and google-cloud-storage) turn into
    the right exception."""
    return {"error": {"code": http_code, "message": message, "status": status}}


def origin_refusal(headers: Mapping[str, str], port: int) -> Refusal | None:
    """Refuse what did not come from a local, non-browser client. ``headers`` has lower-case
    names (both servers' header types look up case-insensitively)."""
    host = headers.get("host", "")
    allowed = [f"{name}:{port}" for name in LOOPBACK_NAMES]
    if host not in allowed:
        return Refusal(
            403,
            "PERMISSION_DENIED",
            f"Host {host!r} is not this local platform: it serves requests addressed to "
            f"{' or '.join(allowed)} only (a different name is how DNS rebinding gets in)",
        )
    for name in BROWSER_HEADERS:
        if name in headers:
            return Refusal(
                403,
                "PERMISSION_DENIED",
                f"requests from web browsers ({name}: {headers[name]}) are refused: the local "
                f"platform serves command-line tools and SDKs on this machine only",
            )
    return None


def body_refusal(method: str, headers: Mapping[str, str]) -> Refusal | None:
    """The control plane's bodies: JSON, with a declared length of at most MAX_BODY_BYTES."""
    if method not in BODY_METHODS:
        return None
    length = headers.get("content-length")
    if length is None:
        if "transfer-encoding" in headers:
            return Refusal(411, "INVALID_ARGUMENT", "a request body needs a Content-Length")
        return None
    if not length.isdigit():
        return Refusal(400, "INVALID_ARGUMENT", f"Content-Length {length!r} is not a number")
    if int(length) > MAX_BODY_BYTES:
        return Refusal(
            413,
            "INVALID_ARGUMENT",
            f"request body of {int(length)} bytes is over the limit of {MAX_BODY_BYTES} bytes",
        )
    media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if int(length) > 0 and media_type != "application/json":
        return Refusal(
            415,
            "INVALID_ARGUMENT",
            f"request bodies must be Content-Type: application/json, not {media_type or 'none'!r}",
        )
    return None


def socket_owner(client_port: int, server_port: int, table: Path = SOCKET_TABLE) -> int | None:
    """The uid owning the client's end of the loopback connection 127.0.0.1:client_port ->
    127.0.0.1:server_port; -1 if the kernel knows no such connection; None where it cannot say
    (not Linux). Asked of the kernel for that one connection (`_sock_diag_owner`), else read
    from its socket table, which it writes by walking every connection: about 7 ms with the
    ~1,200 a soak leaves in TIME_WAIT (bench/RESULTS.md, "Soak"), against ~10 us for the
    lookup. Never cached by port: a closed connection's port soon belongs to another."""
    if table == SOCKET_TABLE:
        owner = _sock_diag_owner(client_port, server_port)
        if owner is not None:
            return owner
    return _table_owner(client_port, server_port, table)


def _sock_diag_owner(client_port: int, server_port: int) -> int | None:
    """The uid from Linux's sock_diag netlink interface (what `ss` uses): an exact lookup of
    the connection's socket, a request and an answer of a hundred bytes. None where netlink
    is not there (not Linux, or a sandbox without it): the table is read instead. Written here
    because no maintained library wraps the one call (pyroute2 is a large dependency for it)."""
    sock_id = struct.pack("!HH", client_port, server_port) + _LOOPBACK_ID + _LOOPBACK_ID
    request = struct.pack("=BBBxI", socket.AF_INET, socket.IPPROTO_TCP, 0, _ALL_TCP_STATES)
    request += sock_id + struct.pack("=III", 0, _INET_DIAG_NOCOOKIE, _INET_DIAG_NOCOOKIE)
    header = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0)
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as link:
            link.settimeout(1.0)
            link.sendto(header + request, (0, 0))
            answer = link.recv(8192)
    except (OSError, AttributeError):  # AttributeError: no AF_NETLINK on this platform
        return None
    if len(answer) < 16:
        return None
    kind = struct.unpack_from("=H", answer, 4)[0]
    if kind == _NLMSG_ERROR:
        code = -struct.unpack_from("=i", answer, 16)[0]
        return -1 if code == errno.ENOENT else None
    if kind != _SOCK_DIAG_BY_FAMILY or len(answer) < _UID_OFFSET + 4:
        return None
    return struct.unpack_from("=I", answer, _UID_OFFSET)[0]


def _table_owner(client_port: int, server_port: int, table: Path) -> int | None:
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return None
    local, remote = f"{LOOPBACK_HEX}:{client_port:04X}", f"{LOOPBACK_HEX}:{server_port:04X}"
    for line in lines:
        fields = line.split()
        if fields[1:3] == [local, remote]:
            return int(fields[7])
    return -1


def peer_refusal(client_port: int, server_port: int) -> Refusal | None:
    """Refuse connections from programs of other users (where the kernel can tell)."""
    owner = socket_owner(client_port, server_port)
    if owner is None or owner == os.getuid():
        return None
    who = "an unknown user" if owner < 0 else f"uid {owner}"
    return Refusal(
        403,
        "PERMISSION_DENIED",
        f"this local platform serves the user who started it (uid {os.getuid()}) only; the "
        f"request came from {who}",
    )


def token_refusal(headers: Mapping[str, str], token: str) -> Refusal | None:
    """The vtx-only endpoints want ``Authorization: Bearer <token from state.json>``."""
    given = headers.get("authorization", "")
    if hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        return None
    return Refusal(
        401,
        "UNAUTHENTICATED",
        "this endpoint needs the local platform's token (Authorization: Bearer TOKEN, where "
        "TOKEN is `token` in the data dir's state.json); `vtx` commands send it themselves",
    )
