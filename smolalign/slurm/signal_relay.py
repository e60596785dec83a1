"""The time-limit signal on each training node of a `launch slurm` job: `python -m smolalign.slurm.signal_relay
accelerate launch ...` runs the launcher and hands every SIGUSR1 it gets to the training ranks the launcher started.

Why: Slurm delivers a step's signal by its process tracking. With proctrack/cgroup every process of the step gets it;
with proctrack/pgid only the task's process group does, and torchrun (behind `accelerate launch`) starts each rank
in a session of its own, so no rank would ever see the signal, save, and stop before the time limit. The relay is in
the task's group, so it gets the signal in both modes and sends it on to the launcher's children, the ranks. Under
cgroup tracking a rank then gets it twice, which is harmless: the rank's handler only sets a flag
(smolalign.runs.save_on_signal). The launcher itself ignores the signal (inherited), as its default action would end
it. Standard library only: it runs before anything else on the node.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

RELAYED = signal.SIGUSR1


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == pid:
            found.append(int(stat.parent.name))
    return found


def relay(command: list[str]) -> int:
    """Run `command` with RELAYED ignored (and so ignored in it), sending each RELAYED this process gets to the
    command's children; the command's exit status (128 + N for a death by signal N, as a shell reports it)."""
    signal.signal(RELAYED, signal.SIG_IGN)
    launcher = subprocess.Popen(command)

    def send_on(signum, frame):
        for rank in children(launcher.pid):
            try:
                os.kill(rank, signum)
            except ProcessLookupError:
                pass

    signal.signal(RELAYED, send_on)
    for ended in (signal.SIGTERM, signal.SIGINT):  # a cancelled step: Slurm signals the launcher too, in both
        signal.signal(ended, lambda signum, frame: None)  # modes; the relay waits for it to stop its ranks
    status = launcher.wait()
    return 128 - status if status < 0 else status


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m smolalign.slurm.signal_relay COMMAND [ARGS...]")
    sys.exit(relay(sys.argv[1:]))


if __name__ == "__main__":
    main()
