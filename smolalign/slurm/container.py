"""The container side of `smolalign launch slurm RECIPE --container IMAGE`: which host paths the job's steps need
inside the image (this directory, the run directory, the recipe's folder, local models, data, templates and reward
files, an accelerate config file, --container-mount), each mounted at the same path, and a shipped preset kept by name so that the image
resolves it; and the words that put a step of the script in the image."""

import shlex
from dataclasses import dataclass
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.launch import presets
from smolalign.resolve import Run
from smolalign.slurm.options import CONTAINER_RUNTIMES, UNSAFE_IN_SRUN, SlurmRequest
from smolalign.stages.lifecycle import run_dir_of


@dataclass(frozen=True)
class Container:
    """The image every srun step runs in (training and the vLLM server); the batch script runs on the host, which
    needs no smolalign."""

    image: str
    runtime: str
    """pyxis (`srun --container-image`, enroot) or apptainer (`srun apptainer exec`)."""
    mounts: tuple[str, ...]
    """Host paths mounted at the same path in the image; the HF cache ($HF_HOME) is added on the node."""
    made: tuple[str, ...] = ()
    """Mounted directories the job creates first (the run directory: a mount's source must exist)."""
    preset: str = ""
    """A shipped accelerate preset, by name: its path is the image's, resolved in the image."""



SCHEMES = ("docker://", "oras://", "library://", "docker-archive://", "shub://")
"""apptainer's image URI schemes (a `.sif` path needs none)."""


def registry_and_name(image: str) -> tuple[str, str]:
    """(registry, repository[:tag]) of a registry image written as Docker writes it (`ghcr.io/org/x:1`,
    `nvcr.io/nvidia/pytorch:25.01-py3`, `org/x:1`), as enroot writes it (`ghcr.io#org/x:1`), with or without
    `docker://`. The registry is "" for Docker Hub: Docker's rule, a first component with a dot or a port, or
    `localhost`, names a registry; `docker.io` is Docker Hub itself."""
    rest = image.removeprefix("docker://")
    if "#" in rest:
        registry, _, name = rest.partition("#")
        return registry.rpartition("@")[2], name
    first, _, remainder = rest.partition("/")
    if remainder and ("." in first or ":" in first or first == "localhost"):
        return ("" if first in ("docker.io", "index.docker.io", "registry-1.docker.io") else first), remainder
    return "", rest


def image_reference(image: str, runtime: str) -> str:
    """`--container IMAGE` as the runtime reads it. pyxis (enroot) takes `REGISTRY#IMAGE[:TAG]`, a Docker Hub name as
    it is, or a squashfs file's path (`.sqsh`): `ghcr.io/org/x:1` would be looked up on Docker Hub. apptainer takes
    a `.sif` file's path or a URI: `docker://REGISTRY/IMAGE[:TAG]`, `oras://`, `library://`. A local image file is
    made absolute (the step's working directory is the job's); one of the other runtime's kind is refused."""
    if image.endswith((".sqsh", ".sif")) and not image.startswith(SCHEMES):
        wanted = ".sqsh" if runtime == "pyxis" else ".sif"
        if not image.endswith(wanted):
            raise SmolalignError(f"--container {image}: a {image.rsplit('.', 1)[1]} file is not an image {runtime} "
                                 f"runs; give a {wanted} file or a registry image")
        return str(Path(image).expanduser().resolve())
    if runtime == "apptainer":
        if image.startswith(SCHEMES) and not image.startswith("docker://"):
            return image
        registry, name = registry_and_name(image)
        return f"docker://{registry + '/' if registry else ''}{name}"
    if image.startswith(SCHEMES) and not image.startswith("docker://"):
        raise SmolalignError(f"--container {image}: pyxis pulls registry images (REGISTRY#IMAGE:TAG) or runs a .sqsh "
                             "file; use --container-runtime apptainer for this one")
    registry, name = registry_and_name(image)
    return f"{registry}#{name}" if registry else name


def container_of(request: SlurmRequest, run: Run, recipe_file: Path, preset: Path,
                 served_model: str | None) -> Container | None:
    """The image's settings for --container: the paths mounted in it (this directory, the run directory, the
    recipe's folder, local models and data, the accelerate config, --container-mount), each at the same path."""
    if request.container is None:
        return None
    run_dir = run_dir_of(run, request.output_dir).expanduser().resolve()
    shipped_preset = next((name for name, path in presets().items() if path == preset), "")
    files = [recipe_file, *([] if shipped_preset else [preset]), *([served_model] if served_model else []),
             run.recipe.model.source, *recipe_files(run)]
    paths = [Path.cwd(), run_dir, *(Path(p).expanduser().resolve() for p in request.container_mounts)]
    for file in map(Path, files):
        if file.is_absolute() and file.exists():
            paths.append(file.parent if file.is_file() else file)
    runtime = request.container_runtime or CONTAINER_RUNTIMES[0]
    return Container(image=image_reference(request.container, runtime), runtime=runtime,
                     mounts=outermost(paths), made=(str(run_dir),), preset=shipped_preset)


def recipe_files(run: Run) -> list[str]:
    """Paths the recipe names besides the policy: a teacher or reference model, training and evaluation data, a
    template file, the files of rewards (`model:PATH`, `file.py:function`) of rl, graded pairs and eval, and of rl's
    tools (`file.py:function`, `file.py:Class`). Those
    that are existing absolute paths are mounted (relative ones live in the recipe's folder, mounted too)."""
    recipe = run.recipe
    rewards = [*recipe.rewards, *(recipe.evaluation.rewards if recipe.evaluation else []),
               *(recipe.pairs.graded.scorer if recipe.pairs is not None and recipe.pairs.graded is not None else [])]
    named = [reward.name.removeprefix("model:").partition(".py:")[0] + (".py" if ".py:" in reward.name else "")
             for reward in rewards]
    tools = [*recipe.tools.use, recipe.tools.environment or ""] if recipe.tools is not None else []
    named += [spec.partition(".py:")[0] + ".py" for spec in tools if ".py:" in spec]
    return [*([recipe.teacher.source] if recipe.teacher else []),
            *([recipe.reference.source] if recipe.reference is not None and recipe.reference.source else []),
            *(source.path for source in run.data.sources),
            *(source.path for source in (recipe.evaluation.data if recipe.evaluation else [])),
            recipe.template.name, *named]


def outermost(paths: list) -> tuple[str, ...]:
    """The paths to mount: a path inside another is visible through it; each checked for the mount list."""
    mounts: list[Path] = []
    for path in sorted(set(map(Path, paths))):
        if not any(path.is_relative_to(mount) for mount in mounts):
            mounts.append(path)
    for mount in mounts:
        if UNSAFE_IN_SRUN.search(str(mount)) or ":" in str(mount):
            raise SmolalignError(f"--container: {mount} cannot be mounted (a mount list cannot hold spaces, quotes, "
                                 "commas or colons); move it, or pass -o to a run directory without them")
    return tuple(map(str, mounts))


HOST_CACHES = ("HF_HOME", "SMOLALIGN_CACHE")
"""The host's caches a step uses in the image, at the host's paths: models, datasets and the `hf auth login` token
(HF_HOME), and the data smolalign prepared (SMOLALIGN_CACHE), so every node of every requeue reads what the first
wrote. The image sets HOME and HF_HOME itself (Dockerfile), and pyxis and apptainer keep an image's ENV over the
host's environment unless a step states otherwise, so each step states them."""


def container_mounts(container: Container) -> list[str]:
    mounts = [f"{path}:{path}" for path in container.mounts] + [f"${name}:${name}" for name in HOST_CACHES]
    return [
        "# The image sees these host paths at the same place: the run directory, the recipe, the caches.",
        'export HF_HOME="${HF_HOME:-$HOME/.cache/huggingface}"',
        'export SMOLALIGN_CACHE="${SMOLALIGN_CACHE:-$HOME/.cache/smolalign}"',
        'mkdir -p "$HF_HOME" "$SMOLALIGN_CACHE"' + "".join(f" {shlex.quote(path)}" for path in container.made),
        "CONTAINER_MOUNTS=" + '"' + ",".join(mounts) + '"',
    ]


def in_container(job) -> tuple[str, str]:
    """(srun options, words before the command) that run a step in the job's image, with the host's caches
    (`HOST_CACHES`) over the image's own variables; empty without one."""
    container = job.container
    if container is None:
        return "", ""
    image, workdir = shlex.quote(container.image), shlex.quote(job.workdir)
    if container.runtime == "apptainer":
        stated = ",".join(f"{name}=${name}" for name in HOST_CACHES)
        return "", f'apptainer exec --nv --bind "$CONTAINER_MOUNTS" --env "{stated}" --pwd {workdir} {image} '
    return (f'--container-image={image} --container-mounts="$CONTAINER_MOUNTS" --container-workdir={workdir} '
            f'--container-env={",".join(HOST_CACHES)} '), ""
