"""`smolalign sweep RECIPE --grid ... --slurm KEY=VALUE`: the sweep as one Slurm array job, one task per cell,
written by `smolalign launch slurm`'s machinery. Every cell is checked for the cluster as `launch slurm` checks a
recipe; every task runs `smolalign sweep ... --array-task` under accelerate, which trains and evaluates the cell
$SLURM_ARRAY_TASK_ID (resuming it when requeued). Once the job is done, the same sweep command without --slurm finds
every cell finished and writes the comparison."""

import dataclasses
import shlex
from pathlib import Path

from smolalign.errors import USER_ERRORS, SmolalignError
from smolalign.recipe.typecheck import suggest
from smolalign.slurm.container import outermost
from smolalign.slurm.job import build_job, cluster_hardware, emit_job
from smolalign.slurm.options import SlurmRequest, default_job_name
from smolalign.sweep.run import plan_sweep

_SETTINGS = {"nodes": int, "gpus_per_node": int, "partition": str, "time": str, "account": str, "job_name": str,
             "script": str, "log_dir": Path, "sbatch": list, "setup": list, "submit": bool, "skip_data": bool,
             "signal_before": int, "main_process_port": int, "container": str, "container_runtime": str,
             "container_mounts": list}
"""The `launch slurm` options a sweep's job takes, as `--slurm KEY=VALUE` (sbatch and setup repeat)."""


def slurm_settings(items: list[str]) -> dict:
    settings: dict = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if key not in _SETTINGS:
            raise SmolalignError(f"--slurm {key}: not a setting{suggest(key, _SETTINGS)}; one of "
                                 f"{', '.join(k.replace('_', '-') for k in _SETTINGS)}")
        kind = _SETTINGS[key]
        if kind is bool:
            if text.lower() not in ("", "true", "false", "1", "0", "yes", "no"):
                raise SmolalignError(f"--slurm {key}={text}: expected true or false")
            settings[key] = text.lower() in ("", "true", "1", "yes")
        elif kind is list:
            settings.setdefault(key, []).append(text)
        elif not sep or not text:
            raise SmolalignError(f"--slurm {item!r}: expected KEY=VALUE, e.g. partition=gpu")
        elif kind is int:
            if not text.strip().lstrip("-").isdigit():
                raise SmolalignError(f"--slurm {key}={text}: expected an integer")
            settings[key] = int(text)
        else:
            settings[key] = kind(text)
    return settings


def write_sweep_job(request) -> Path | None:
    """Check every cell for the cluster, then write (and optionally submit) the array job's script."""
    if request.array_task or request.dry_run:
        raise SmolalignError("--slurm writes the job: drop --array-task and --dry-run")
    if request.num_processes is not None:
        raise SmolalignError("--num-processes: a Slurm job starts one process per GPU of its nodes; set --slurm "
                             "nodes=N and --slurm gpus-per-node=G instead")
    settings = slurm_settings(request.slurm)
    base = SlurmRequest(recipe=request.recipe, nodes=settings.pop("nodes", 1), preset=request.launch,
                        overwrite=request.overwrite, argv=list(request.argv), **settings)
    sweep = plan_sweep(request, cluster_hardware(base))
    built = []
    for run in sweep.runs:
        cell = dataclasses.replace(base, recipe=str(sweep.recipe), overrides=run.overrides, output_dir=run.run_dir)
        try:
            built.append(build_job(cell))
        except USER_ERRORS as exc:
            raise SmolalignError(f"sweep cell {run.cell.name}: {exc}") from None
    job, plan, notes = built[0]
    arguments = [word for spec in request.grid for word in ("--grid", spec)]
    arguments += [word for override in request.overrides for word in ("--set", override)]
    if request.seeds is not None:
        arguments += ["--seeds", str(request.seeds)]
    arguments += ["--output-dir", str(sweep.directory), "--array-task"]
    job = dataclasses.replace(job, stage="sweep", train_args=tuple(arguments), array=len(sweep.runs),
                              job_name=base.job_name or default_job_name(str(sweep.recipe), "sweep") + "-sweep")
    if job.container is not None:  # every cell's paths, and the sweep's folder, which the job creates

        mounts = [mount for cell_job, _, _ in built for mount in cell_job.container.mounts]
        job = dataclasses.replace(job, container=dataclasses.replace(
            job.container, mounts=outermost([*mounts, sweep.directory.resolve()]),
            made=(str(sweep.directory.resolve()),)))
    notes = [f"{len(sweep.runs)} array tasks, one per cell; the cells and the comparison go to {sweep.directory}: "
             "every node must see it (a shared filesystem)", *[n for n in notes if not n.startswith("run directory")]]
    path = emit_job(dataclasses.replace(base, job_name=job.job_name), job, plan, notes)
    print(f"when the job is done, write the comparison with: smolalign {shlex.join(_without_slurm(request.argv))}")
    return path


def _without_slurm(argv: list[str]) -> list[str]:
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word == "--slurm":
            skip = True
        elif not word.startswith("--slurm="):
            out.append(word)
    return out
