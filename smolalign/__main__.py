"""`python -m smolalign ...`, so launchers (accelerate, torchrun) can run the CLI as a module."""

from smolalign.cli import run

run()
