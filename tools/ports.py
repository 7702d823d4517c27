"""Loopback ports for the local services the tools start (Kafka nodes, their exporters, Prometheus, Spark)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

PORTS_FROM = 20000  # from here up to the kernel's ephemeral range (see free_ports)


def free_ports(count: int) -> list[int]:
    """Ports free right now (all held open together so they are distinct), below the kernel's ephemeral range: a
    port from that range may be taken, while the service on it is stopped, by any outgoing connection (even by a
    client's own retries to that very port: a TCP self-connect), and the service, a broker a test restarts, could
    not bind it again."""
    low = _ephemeral_low()
    sockets = []
    try:
        while len(sockets) < count:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", random.randrange(PORTS_FROM, max(low, PORTS_FROM + 1000))))
            except OSError:  # taken: another
                s.close()
                continue
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _ephemeral_low() -> int:
    """The first port of the kernel's range for outgoing connections (Linux's default when it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
