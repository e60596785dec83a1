"""What a stage whose policy generates while it trains (GRPO, online DPO, distillation) adds to its run: the
server's port and vLLM's engine checked before anything loads; the server (one smolalign starts, on the GPUs kept for
it, or one that runs) and the stall watchdog held from the config to the end of training; and every weight sync
into vLLM timed and checked (stages.weight_sync).
`smolalign rl recipes/quickstart/rl.yaml --dry-run`
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from smolalign.generation.backend_settings import ServerAddress, stall_timeout, sync_timeout
from smolalign.generation.server import check_port, served_generation
from smolalign.generation.vllm_engine import check_generation
from smolalign.hardware import generation_dtype
from smolalign.models.config import model_width
from smolalign.resolve import Run
from smolalign.runs.watchdog import Watchdog, stall_watchdog
from smolalign.stages.weight_sync import check_weight_syncs, describe_sync_check


def check_generating(run: Run) -> None:
    """A server smolalign is to start needs its port free, and a vLLM engine must be able to load the model here."""
    check_port(run.recipe)
    check_generation(run)


def add_sync_row(plan, run: Run) -> None:
    """The plan's `weight sync` row, where the policy generates with vLLM."""
    if (row := describe_sync_check(run.recipe.generation)) is not None:
        plan.rows["weight sync"] = row


@dataclass(frozen=True)
class Generation:
    """Where the policy's generation is served while it trains."""

    server: ServerAddress | None
    """The vLLM server's address and weight-sync port (None: the policy generates in the training process)."""
    watchdog: Watchdog
    """Its `callback()` tells it of every step; it times the weight syncs into vLLM."""

    def check_syncs(self, trainer) -> None:
        """Every weight sync of `trainer` into vLLM timed and checked (stages.weight_sync)."""
        check_weight_syncs(trainer, self.watchdog)


def policy_generation_dtype(run: Run) -> str:
    """The dtype the policy generates in (its engines, TRL's colocated vLLM on a CPU): hardware.generation_dtype at
    the policy's width."""
    return generation_dtype(run.recipe.model.dtype, run.hardware, model_width(run.source()))


@contextmanager
def generating(run: Run, opened) -> Iterator[Generation]:
    """The run's vLLM server (started, health-checked and stopped) and its stall watchdog, for a run opened as
    `opened` (`stages.lifecycle.OpenRun`). The config is built inside: the server's address is one of its fields."""
    stall = stall_timeout(run.recipe.generation)
    dtype = policy_generation_dtype(run)
    with (served_generation(run, opened.state, dtype, opened.gpus, run_dir=opened.run_dir) as server,
          stall_watchdog(stall, server, sync_timeout(run.recipe.generation)) as watchdog):
        address = ServerAddress(server.base_url, server.group_port) if server else None
        yield Generation(address, watchdog)
