"""Where a training run's compiled kernels are kept: beside smolalign's other caches, so that the next run skips the
compilation the first one paid for.

Flex attention compiles its block mask and kernels on a run's first step (247 s for a 3B at 16,384 tokens on an H200),
and TorchInductor and Triton keep what they compiled by default in a torchinductor_<user> folder of the system's
temporary directory and under the home directory: inside a container (the image's HOME) or a Slurm job's private
temporary directory both are gone when the run ends, so every run compiled again. Under SMOLALIGN_CACHE
(~/.cache/smolalign; the host's, mounted into a job's container) they persist across runs, jobs and requeues. A variable
already set wins, so this is set when a train command starts (before TRL's import, which sets TorchInductor's default
into the environment), and launched ranks inherit it.
"""

import os

from smolalign.models.sources import cache_root

COMPILE_CACHES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}
"""Each compiler's cache variable and its folder under SMOLALIGN_CACHE/compile."""


def keep_compiled_kernels(environ=os.environ) -> dict[str, str]:
    """Point the compilers' caches under SMOLALIGN_CACHE/compile where nothing set them; returns what was set."""
    root = cache_root() / "compile"
    chosen = {variable: str(root / folder) for variable, folder in COMPILE_CACHES.items() if variable not in environ}
    environ.update(chosen)
    return chosen
