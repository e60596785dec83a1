"""What is left of a process group after a run ends: its live members from /proc, and a wait until none is left and
a port is free again (for the vLLM server smolalign starts and its engine processes)."""

import time
from pathlib import Path

from smolalign.ports import port_in_use


def group_members(group: int) -> list[int]:
    """Live processes (zombies aside) of process group `group`, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _, pgrp = stat[stat.rindex(")") + 2:].split()[:3]
        if int(pgrp) == group and state != "Z":
            found.append(int(entry.name))
    return found


def assert_gone(group: int, port: int, wait: float = 15.0) -> None:
    """No process of the server's group is left (its engine core included), and its port is free again."""
    deadline = time.monotonic() + wait
    while (group_members(group) or port_in_use(port)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not group_members(group), f"processes of the server's group {group} left: {group_members(group)}"
    assert not port_in_use(port), f"port {port} still held"
