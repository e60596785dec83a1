"""TCP ports on this machine: whether one is free, and a free one to listen on (the rendezvous of a launch, a vLLM
server smolalign starts, the weight-transfer group training hosts). A port found free can still be taken before it
is used; what listens on it then fails, naming it."""

import socket


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether `port` cannot be bound on `host` (something listens there, or is about to)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on at `host` now ("" for every interface), from the kernel's ephemeral range."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]
