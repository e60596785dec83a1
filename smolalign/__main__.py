"""`python -m smolalign ...`, so launchers (accelerate, torchrun) can run the CLI as a module."""

import os

from smolalign.launch import SAFE_PATH


def forget_safe_path() -> None:
    """The launched process started with the working directory off its module path (launch.SAFE_PATH); what it
    starts in turn (a team's helper script, a vLLM server) starts as it would anywhere else."""
    if os.environ.get("SMOLALIGN_SAFE_PATH") == "1":
        for name in (*SAFE_PATH, "SMOLALIGN_SAFE_PATH"):
            os.environ.pop(name, None)


forget_safe_path()

from smolalign.cli import run  # noqa: E402

run()
