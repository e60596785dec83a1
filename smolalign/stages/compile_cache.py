"""Where a training run's compiled kernels are kept: beside smolalign's other caches, so that the next run skips the
compilation the first one paid for.

Flex attention compiles its block mask and kernels on a run's first step (247 s for a 3B at 16,384 tokens on an H200),
and TorchInductor and Triton keep what they compiled by default in a torchinductor_<user> folder of the system's
temporary directory and under the home directory: inside a container (the image's HOME) or a Slurm job's private
temporary directory both are gone when the run ends, so every run compiled again. Under SMOLALIGN_CACHE
(~/.cache/smolalign; the host's, mounted into a job's container) they persist across runs, jobs and requeues. A variable
already set wins, so this is set when a train command starts (before TRL's import, which sets TorchInductor's default
into the environment), and launched ranks inherit it.

On a CPU, TorchInductor's C++ kernels include a precompiled header that it keeps under the temporary directory's
default cache folder whatever TORCHINDUCTOR_CACHE_DIR says (torch/_inductor/codecache.py, `_HEADER_DIR`): ~10 s of a
compiled run's first step in every job with a private temporary directory (benchmarks/compile_cache.py). While a run
that compiles on a CPU trains, the header goes beside its other compiled kernels (`precompiled_header_kept`).
"""

import contextlib
import os
from collections.abc import Iterator

from smolalign.library_patch import replaced
from smolalign.models.sources import cache_root

COMPILE_CACHES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}
"""Each compiler's cache variable and its folder under SMOLALIGN_CACHE/compile."""


def keep_compiled_kernels(environ=os.environ) -> dict[str, str]:
    """Point the compilers' caches under SMOLALIGN_CACHE/compile where nothing set them; returns what was set."""
    root = cache_root() / "compile"
    chosen = {variable: str(root / folder) for variable, folder in COMPILE_CACHES.items() if variable not in environ}
    environ.update(chosen)
    return chosen


@contextlib.contextmanager
def precompiled_header_kept(accelerator: str, compiles: bool) -> Iterator[None]:
    """While it is open, on a CPU ("cpu") and for a run that compiles, TorchInductor precompiles its C++ header into
    its cache folder (TORCHINDUCTOR_CACHE_DIR) instead of the temporary directory's; elsewhere nothing changes."""
    if accelerator != "cpu" or not compiles:
        yield
        return
    from torch._inductor import codecache
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    if not hasattr(codecache, "_HEADER_DIR"):  # a torch that keeps its header elsewhere: nothing to move
        yield
        return
    headers = os.path.join(cache_dir(), "precompiled_headers")
    with replaced(codecache, "_HEADER_DIR", lambda _: headers), \
            replaced(codecache, "_HEADER_LOCK_DIR", lambda _: os.path.join(headers, "locks")):
        yield
