"""The one place ports of 127.0.0.1 are chosen: free ones differ, a taken one is not free, and a
recorded one another program took is replaced, and said."""

from __future__ import annotations

import socket

from jobs.local.plumbing.ports import free_port, free_ports, port_free
from jobs.local.plumbing.processes import recorded_port


def test_free_ports_differ_and_can_be_listened_on() -> None:
    ports = free_ports(4)
    assert len(set(ports)) == 4
    assert all(port_free(port) for port in ports)
    assert port_free(free_port())


def test_a_port_something_listens_on_is_not_free() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert not port_free(server.getsockname()[1])


def test_a_recorded_port_is_kept_and_one_taken_since_is_replaced_and_said() -> None:
    port = free_port()
    assert recorded_port(port, "GCS emulator") == (port, None)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        taken = server.getsockname()[1]
        chosen, note = recorded_port(taken, "GCS emulator")
    assert chosen != taken
    assert (
        note == f"the GCS emulator's port {taken} is taken by another program now: using {chosen}"
    )
