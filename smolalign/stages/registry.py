"""Which stage runs each method: its `Stage` (the steps of a run that differ, as direct references), which
`stages.lifecycle.run_lifecycle` runs. The CLI, sweeps and `launch slurm` reach a stage only through this table.

What each method is (its verb, TRL config, data and reference) is `recipe.method_table`'s; its trainer class is
`stages.trainers`'s.
"""

from smolalign.launch import kept_process_variables
from smolalign.recipe.method_table import method_key
from smolalign.resolve import Run
from smolalign.runs.save_on_signal import listening
from smolalign.stages import distill, online_dpo, po, rl, sft
from smolalign.stages.lifecycle import Stage, run_lifecycle

RUNNERS: dict[str, Stage] = {
    "sft": sft.STAGE,
    "dpo": po.STAGE,
    "kto": po.STAGE,
    "orpo": po.STAGE,
    "reward": po.STAGE,
    "grpo": rl.STAGE,
    "online_dpo": online_dpo.STAGE,
    "distill": distill.STAGE,
    "gold": distill.STAGE,
    "auto": distill.STAGE,
}
"""Keyed as `recipe.method_table.METHODS`."""


def runner(run: Run) -> Stage:
    """The stage of a run's method."""
    return RUNNERS[method_key(run.recipe.stage, run.recipe.method)]


def run_stage(resolved: Run, **options):
    """Run a resolved run with its method's stage; returns the saved model's directory (None for a dry run). The
    launcher's variables are as they were before, whatever the run's vLLM engine wrote; the time-limit signal is
    caught from the start (smolalign.runs.save_on_signal)."""
    with kept_process_variables(), listening():  # the time-limit signal, kept from the stage's start
        return run_lifecycle(runner(resolved), resolved, **options)
