"""What `smolalign launch slurm` is asked for, checked before anything else: node and GPU counts, Slurm names,
the time limit against the requeue signal, the container image and runtime, extra #SBATCH and `trl vllm-serve`
options (the only check that imports trl: its option names)."""

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.recipe.typecheck import suggest
from smolalign.runs.rundir import default_run_dir

DEFAULT_PRESET = "zero3"
CONTAINER_RUNTIMES = ("pyxis", "apptainer")
"""pyxis (`srun --container-image`, enroot) is the default; apptainer runs `srun apptainer exec`."""
_NAME = re.compile(r"^[A-Za-z0-9_.:+,@-]+$")
_SBATCH_KEY = re.compile(r"^[a-z][a-z0-9-]*$")
_TIME = re.compile(r"^(?:(?P<days>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"
                   r"|(?P<h>\d+):(?P<m>\d+):(?P<s>\d+)|(?P<mm>\d+)(?::(?P<ss>\d+))?)$")
VLLM_OPTIONS_OWNED = {"model": "it is the recipe's model.source", "host": "the server listens on 0.0.0.0",
                      "port": "set generation.server.port", "tensor_parallel_size": "set generation.server.tensor_parallel",
                      "revision": "it is the recipe's model.revision"}
SBATCH_OWNED = {"nodes": "--nodes and --vllm-nodes", "job-name": "--job-name", "partition": "--partition",
                "time": "--time", "account": "--account", "ntasks-per-node": "the script",
                "signal": "--signal-before", "requeue": "the script", "output": "--log-dir", "error": "--log-dir"}


@dataclass(frozen=True)
class SlurmRequest:
    recipe: str
    nodes: int
    vllm_nodes: int = 0
    gpus_per_node: int = 8
    preset: str | None = None
    overrides: list[str] = field(default_factory=list)
    output_dir: Path | None = None
    partition: str | None = None
    time: str | None = None
    account: str | None = None
    job_name: str | None = None
    script: str | None = None
    """Where the script goes: a file, `-` for stdout, None for slurm/<job name>.sbatch."""
    log_dir: Path | None = None
    overwrite: bool = False
    main_process_port: int = 29500
    signal_before: int = 300
    sbatch: list[str] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)
    vllm_set: list[str] = field(default_factory=list)
    skip_data: bool = False
    submit: bool = False
    argv: list[str] = field(default_factory=list)
    container: str | None = None
    """The image every srun step runs in; the batch script runs on the host."""
    container_runtime: str | None = None
    container_mounts: list[str] = field(default_factory=list)
    """More host paths mounted at the same path in the container (data, rewards)."""


def check_request(request: SlurmRequest) -> None:
    if request.nodes < 1:
        raise SmolalignError(f"--nodes must be at least 1, got {request.nodes}")
    if request.vllm_nodes < 0:
        raise SmolalignError(f"--vllm-nodes must be 0 or 1, got {request.vllm_nodes}")
    if request.vllm_nodes > 1:
        raise SmolalignError(f"--vllm-nodes {request.vllm_nodes}: the trainer talks to one `trl vllm-serve` server, which runs "
                             "on one node (tensor parallel within it); use --vllm-nodes 1")
    if request.vllm_set and not request.vllm_nodes:
        raise SmolalignError("--vllm-set configures the `trl vllm-serve` server of --vllm-nodes 1; without it the job "
                             "starts no server: add --vllm-nodes 1, or drop --vllm-set")
    if request.gpus_per_node < 1:
        raise SmolalignError(f"--gpus-per-node must be at least 1, got {request.gpus_per_node}")
    if not 1 <= request.main_process_port <= 65535:
        raise SmolalignError(f"--main-process-port must be a TCP port (1-65535), got {request.main_process_port}")
    if request.signal_before < 1:
        raise SmolalignError(f"--signal-before must be at least 1 second, got {request.signal_before}")
    for option, value in (("--partition", request.partition), ("--account", request.account),
                          ("--job-name", request.job_name)):
        if value is not None and not _NAME.match(value):
            raise SmolalignError(f"{option} {value!r}: use letters, digits and . _ - : + , @ only")
    if request.time is not None:
        limit = time_limit_seconds(request.time)
        if limit is not None and limit <= request.signal_before:
            raise SmolalignError(f"--time {request.time} is not longer than --signal-before {request.signal_before} s: "
                                 "the job would requeue itself as soon as it starts")
    for key, value in sbatch_options(request.sbatch):
        gpus = re.fullmatch(r"gpu(?::[\w.-]+)?:(\d+)", value) if key == "gres" else None
        if key == "gres" and (gpus is None or int(gpus.group(1)) != request.gpus_per_node):
            raise SmolalignError(f"--sbatch gres={value}: ask for gpu[:TYPE]:{request.gpus_per_node} (one process "
                                 f"per GPU, --gpus-per-node {request.gpus_per_node})")
    for line in request.setup:
        if "\n" in line:
            raise SmolalignError("--setup: one shell line per option (repeat --setup for more)")
    check_container(request)


def check_container(request: SlurmRequest) -> None:
    if request.container is None:
        for option, given in (("--container-runtime", request.container_runtime),
                              ("--container-mount", request.container_mounts)):
            if given:
                raise SmolalignError(f"{option} needs --container IMAGE (the image the job's steps run in)")
        return
    if not request.container.strip():
        raise SmolalignError("--container: empty image name; pass the image, e.g. --container "
                             "ghcr.io/org/smolalign:latest (pyxis) or --container smolalign.sif (apptainer)")
    if UNSAFE_IN_SRUN.search(request.container):
        raise SmolalignError(f"--container {request.container!r}: an image name cannot hold spaces, quotes or commas")
    runtime = request.container_runtime or CONTAINER_RUNTIMES[0]
    if runtime not in CONTAINER_RUNTIMES:
        raise SmolalignError(f"--container-runtime {runtime}: unknown{suggest(runtime, CONTAINER_RUNTIMES)}; use "
                             f"{' or '.join(CONTAINER_RUNTIMES)}")
    for path in request.container_mounts:
        if UNSAFE_IN_SRUN.search(path) or ":" in path:
            raise SmolalignError(f"--container-mount {path!r}: a mounted path cannot hold spaces, quotes, commas or "
                                 "colons; use a symlink without them")
        if not Path(path).expanduser().exists():
            raise SmolalignError(f"--container-mount {path}: no such file or directory here; mount a path that exists "
                                 "on the cluster's shared filesystem")
    for line in request.setup:
        if any(word.rsplit("/", 1)[-1] in ("activate", "conda") for word in line.split()):
            raise SmolalignError(f"--setup {line!r} activates a Python environment on the host, but with --container "
                                 "smolalign runs in the image; drop that --setup line")


UNSAFE_IN_SRUN = re.compile(r"[\s'\"$`\\,]")
"""What breaks an image name or a mount list (SRC:DST,...) on the script's srun line; a mounted path cannot hold
`:` either."""


def time_limit_seconds(text: str) -> int | None:
    """Slurm's --time formats in seconds (minutes, m:s, h:m:s, d-h, d-h:m, d-h:m:s); None for UNLIMITED."""
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    match = _TIME.match(text)
    if not match:
        raise SmolalignError(f"--time {text!r}: expected minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS")
    g = {k: int(v) for k, v in match.groupdict().items() if v is not None}
    if "days" in g:
        return ((g["days"] * 24 + g["dh"]) * 60 + g.get("dm", 0)) * 60 + g.get("ds", 0)
    if "h" in g:
        return (g["h"] * 60 + g["m"]) * 60 + g["s"]
    return g["mm"] * 60 + g.get("ss", 0)


SBATCH_FLAGS = ("contiguous", "exclusive", "hold", "ignore-pmi", "no-kill", "no-requeue", "overcommit",
                "oversubscribe", "parsable", "requeue", "spread-job", "test-only", "use-min-nodes", "wait")
"""sbatch options that take no value (sbatch(1)); every other option written bare would be a broken #SBATCH line."""


def sbatch_options(items: list[str]) -> list[tuple[str, str]]:
    """`--sbatch KEY=VALUE` (or a bare KEY for a flag) as (key, value), keys as sbatch spells them."""
    out = []
    for item in items:
        key, _, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not _SBATCH_KEY.match(key):
            raise SmolalignError(f"--sbatch {item!r}: expected an sbatch option as KEY=VALUE, e.g. qos=high or mem=0")
        if key in SBATCH_OWNED:
            raise SmolalignError(f"--sbatch {key}: set by {SBATCH_OWNED[key]}")
        if key.startswith("container-"):  # pyxis's options: on #SBATCH they would put the batch script in the image
            raise SmolalignError(f"--sbatch {key}: use --container IMAGE (the batch script runs on the host, its srun "
                                 "steps in the image)")
        if any(c.isspace() for c in value):
            raise SmolalignError(f"--sbatch {item!r}: #SBATCH values cannot hold spaces")
        if not value and key not in SBATCH_FLAGS:
            raise SmolalignError(f"--sbatch {key}: needs a value ({key}=VALUE); only sbatch's flags stand alone "
                                 f"({', '.join(SBATCH_FLAGS)})")
        out.append((key, value))
    return out


def vllm_serve_options(items: list[str]) -> list[str]:
    """`--vllm-set KEY=VALUE` as `trl vllm-serve` arguments, keys checked against its ScriptArguments."""
    if not items:
        return []

    from trl.scripts.vllm_serve import ScriptArguments

    known = [f.name for f in dataclasses.fields(ScriptArguments)]
    words = []
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        if not sep:
            raise SmolalignError(f"--vllm-set {item!r}: expected KEY=VALUE, e.g. max_model_len=8192")
        if key in VLLM_OPTIONS_OWNED:
            raise SmolalignError(f"--vllm-set {key}: {VLLM_OPTIONS_OWNED[key]}")
        if key not in known:
            raise SmolalignError(f"--vllm-set {key}: not a `trl vllm-serve` option{suggest(key, known)}")
        words += [f"--{key}", value]
    return words


def default_job_name(recipe_source: str, stage: str) -> str:
    """The run directory's name under runs/ (smollm3-sft for the shipped smollm3/sft), Slurm-safe."""
    name = default_run_dir(recipe_source, stage).relative_to("runs").as_posix().replace("/", "-")
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or f"smolalign-{stage}"
