"""Ports of 127.0.0.1: whether one is free, and free ones to listen on (the platform, the
emulator, replicas' MASTER_PORT, model servers; tests and benchmarks use the same)."""

from __future__ import annotations

import socket


def port_free(port: int) -> bool:
    """Whether a server could listen on the port now. SO_REUSEADDR, as uvicorn and the
    emulator bind: a port whose last connections sit in TIME_WAIT is free to them."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> list[int]:
    """`count` different ports of 127.0.0.1 nothing listens on now (each socket is held open
    until all are chosen, so they differ)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on now."""
    return free_ports(1)[0]
