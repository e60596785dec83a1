"""Which stage runs each method: one `Stage` per stage module (the steps of a run that differ, which
`stages.lifecycle.run_lifecycle` runs), keyed as the method table's `MethodSpec.stage_module`. The CLI, sweeps and
`launch slurm` reach a stage only through this table; the stage gets its method's trainer class from the lifecycle
(`OpenRun.trainer`, the method table's `trainer`).

What each method is (its verb, TRL config and trainer classes, data, reference) is `recipe.method_table`'s.
"""

from smolalign.launch import kept_process_variables
from smolalign.resolve import Run
from smolalign.runs.save_on_signal import listening
from smolalign.stages import distill, online_dpo, po, rl, sft
from smolalign.stages.lifecycle import Stage, run_lifecycle

STAGES: dict[str, Stage] = {
    "sft": sft.STAGE,
    "po": po.STAGE,
    "rl": rl.STAGE,
    "online_dpo": online_dpo.STAGE,
    "distill": distill.STAGE,
}
"""Keyed as `MethodSpec.stage_module`."""


def runner(run: Run) -> Stage:
    """The stage of a run's method."""
    return STAGES[run.method_spec.stage_module]


def run_stage(resolved: Run, **options):
    """Run a resolved run with its method's stage and trainer; returns the saved model's directory (None for a dry
    run). The launcher's variables are as they were before, whatever the run's vLLM engine wrote; the time-limit
    signal is caught from the start (smolalign.runs.save_on_signal)."""
    with kept_process_variables(), listening():  # the time-limit signal, kept from the stage's start
        return run_lifecycle(runner(resolved), resolved, **options)
