"""`smolalign launch slurm RECIPE --nodes N [--vllm-nodes 1]`: a checked sbatch script for a multi-node run."""

from pathlib import Path
from typing import Annotated

import typer

from smolalign.cli.options import OutputDirOption, RecipeArg, SetOption, command_line

app = typer.Typer(no_args_is_help=True, help="Launch scripts for clusters (Slurm).")

Nodes = Annotated[int, typer.Option("--nodes", "-N", help="Training nodes.", show_default=False)]
VllmNodes = Annotated[int, typer.Option("--vllm-nodes", help="Nodes for a `trl vllm-serve` server (0 or 1; rl "
                                                             "recipes with generation.backend vllm_server).")]
GpusPerNode = Annotated[int, typer.Option("--gpus-per-node", "-G", help="GPUs per node; one process each.")]
Preset = Annotated[str | None, typer.Option("--preset", help="Accelerate preset (ddp, zero2, zero3, zero3_offload, "
                                                             "fsdp2) or config file; default: launch.preset, else "
                                                             "zero3.")]
Partition = Annotated[str | None, typer.Option("--partition", "-p", help="Slurm partition.")]
TimeLimit = Annotated[str | None, typer.Option("--time", "-t", help="Time limit per run (e.g. 2-00:00:00); the job "
                                                                    "requeues itself before it and resumes.")]
Account = Annotated[str | None, typer.Option("--account", "-A", help="Slurm account.")]
JobName = Annotated[str | None, typer.Option("--job-name", "-J", help="Default: the recipe's run name.")]
Script = Annotated[str | None, typer.Option("--script", help="Where to write the script (- for stdout); default: "
                                                            "slurm/JOB_NAME.sbatch.")]
LogDir = Annotated[Path | None, typer.Option("--log-dir", help="Slurm logs (%x-%j.out/.err); default: logs/ next "
                                                               "to the script.")]
Overwrite = Annotated[bool, typer.Option("--overwrite", help="The first run empties the run directory; requeued "
                                                             "runs resume.")]
Port = Annotated[int, typer.Option("--main-process-port", help="Rendezvous port on the first training node.")]
SignalBefore = Annotated[int, typer.Option("--signal-before", help="Seconds before the time limit at which the job "
                                                                   "requeues itself (Slurm signals within ~60 s).")]
Sbatch = Annotated[list[str] | None, typer.Option("--sbatch", help="Extra #SBATCH option, KEY=VALUE (qos=high, "
                                                                   "mem=500G, constraint=h100); repeatable.")]
Setup = Annotated[list[str] | None, typer.Option("--setup", help="Shell line run first on the cluster (module load "
                                                                 "cuda/12.4); repeatable.")]
VllmSet = Annotated[list[str] | None, typer.Option("--vllm-set", help="`trl vllm-serve` option, KEY=VALUE "
                                                                      "(max_model_len=8192); repeatable.")]
SkipData = Annotated[bool, typer.Option("--skip-data", help="Check the recipe and batch arithmetic but do not read "
                                                            "the data here.")]
Submit = Annotated[bool, typer.Option("--submit", help="Run sbatch on the script.")]
ContainerImage = Annotated[str | None, typer.Option("--container", help="Image every srun step runs in (the script "
                                                                        "runs on the host): pyxis image name, or an "
                                                                        "apptainer .sif / docker:// URI.")]
ContainerRuntime = Annotated[str | None, typer.Option("--container-runtime", help="pyxis (srun --container-image, "
                                                                                  "default) or apptainer.")]
ContainerMount = Annotated[list[str] | None, typer.Option("--container-mount", help="More host paths mounted at the "
                                                                                    "same path in the image (the "
                                                                                    "run, recipe, models, local data "
                                                                                    "and HF cache already are); "
                                                                                    "repeatable.")]


@app.command()
def slurm(ctx: typer.Context, recipe: RecipeArg, nodes: Nodes, vllm_nodes: VllmNodes = 0,
          gpus_per_node: GpusPerNode = 8, preset: Preset = None, set_: SetOption = None,
          output_dir: OutputDirOption = None, partition: Partition = None, time: TimeLimit = None,
          account: Account = None, job_name: JobName = None,
          script: Script = None, log_dir: LogDir = None, overwrite: Overwrite = False, main_process_port: Port = 29500,
          signal_before: SignalBefore = 300, sbatch: Sbatch = None, setup: Setup = None, vllm_set: VllmSet = None,
          skip_data: SkipData = False, submit: Submit = False, container: ContainerImage = None,
          container_runtime: ContainerRuntime = None, container_mount: ContainerMount = None) -> None:
    """Write an sbatch script that trains RECIPE on N nodes (accelerate, c10d rendezvous), with an optional vLLM
    server node, optionally in a container image; before its time limit training saves a checkpoint, and the job is
    requeued and resumes from it. The recipe is checked first."""
    from smolalign.slurm.job import write_job
    from smolalign.slurm.options import SlurmRequest

    write_job(SlurmRequest(
        recipe=recipe, nodes=nodes, vllm_nodes=vllm_nodes, gpus_per_node=gpus_per_node, preset=preset,
        overrides=set_ or [], output_dir=output_dir, partition=partition, time=time, account=account,
        job_name=job_name, script=script, log_dir=log_dir, overwrite=overwrite, main_process_port=main_process_port,
        signal_before=signal_before, sbatch=sbatch or [], setup=setup or [], vllm_set=vllm_set or [],
        skip_data=skip_data, submit=submit, argv=command_line(ctx), container=container,
        container_runtime=container_runtime, container_mounts=container_mount or []))
