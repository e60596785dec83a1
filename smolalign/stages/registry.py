"""Which stage runs each method: the functions that check, plan and run it, as direct references. The CLI, sweeps
and `launch slurm` reach a stage only through this table. Importing it imports the stage modules, none of which
imports torch or trl before a run needs them.

What each method is (its verb, TRL config, data and reference) is `recipe.method_table`'s; its trainer class is
`stages.trainers`'s.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from smolalign.launch import kept_process_variables
from smolalign.recipe.method_table import method_key
from smolalign.resolve import Run
from smolalign.runs.save_on_signal import listening
from smolalign.stages import distill, online_dpo, po, rl, sft


@dataclass(frozen=True)
class Runner:
    check: Callable
    """`check(run)`: everything checkable before a weight loads; the first value it returns is the plan."""
    run: Callable[..., Path | None]
    """`run(run, *, output_dir, dry_run, resume, overwrite)`: the saved model's directory (None for a dry run)."""
    check_batch: Callable | None = None
    """`check_batch(run)`: the batch rules alone, where the stage checks them apart from the data (for
    `launch slurm --skip-data-check`)."""


_PO = Runner(po.check_before_loading, po.run)
_DISTILL = Runner(distill.check_before_loading, distill.run)
RUNNERS: dict[str, Runner] = {
    "sft": Runner(sft.check_before_loading, sft.run),
    "dpo": _PO,
    "kto": _PO,
    "orpo": _PO,
    "reward": _PO,
    "grpo": Runner(rl.check_before_loading, rl.run, rl.check_batch),
    "online_dpo": Runner(online_dpo.check_before_loading, online_dpo.run),
    "distill": _DISTILL,
    "gold": _DISTILL,
    "auto": _DISTILL,
}
"""Keyed as `recipe.method_table.METHODS`."""


def runner(run: Run) -> Runner:
    """The stage functions for a run's method."""
    return RUNNERS[method_key(run.recipe.stage, run.recipe.method)]


def run_stage(run: Run, **options):
    """Run a resolved run with its method's stage; returns the saved model's directory (None for a dry run). The
    launcher's variables are as they were before, whatever the run's vLLM engine wrote; the time-limit signal is
    caught from the start (smolalign.runs.save_on_signal)."""
    with kept_process_variables(), listening():  # the time-limit signal, kept from the stage's start
        return runner(run).run(run, **options)
