"""The wheels an offline GPU machine needs to run the GPU benchmarks (gpu_figures.py, gpu_sft.py, ...) when its image
already holds torch, transformers, accelerate, peft and triton but nothing else of smolalign's: downloaded here, at
the versions this environment has installed (the ones the tests ran against), for the GPU machine's Python.

    .venv/bin/python benchmarks/gpu_wheels.py [--dest .whl] [--python-version 3.12]

On the GPU machine, before the benchmark:

    site=$(mktemp -d) && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$site" .whl/*.whl && export PYTHONPATH="$site"

DeepSpeed publishes only an sdist, which needs a compiler and network to build: its wheel (pure Python; its ops are
built on first use) is built here. Each wheel is checked against the target platform's tags; the script fails
naming any distribution that has no wheel for it, so a missing one is found here rather than on the GPU's clock.
"""

import argparse
import re
import subprocess
import sys
import tempfile
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parent.parent

CARRIED = (
    # TRL and what it needs beyond the image
    "trl", "datasets", "dill", "multiprocess",
    # smolalign's CLI and recipe validation
    "typer", "pydantic", "pydantic_core", "annotated-types", "typing-inspection", "typing-extensions",
    # the math reward (imported by the rewards registry)
    "math-verify", "latex2sympy2_extended", "antlr4-python3-runtime",
    # the GGUF loader of the bundled model, Liger's kernels, DeepSpeed and its config parser
    "gguf", "liger-kernel", "hjson", "deepspeed",
)
"""Distributions the GPU image lacks, or holds at another version than smolalign's pins."""
IN_THE_IMAGE = ("torch", "transformers", "accelerate", "peft", "pyyaml", "jinja2")
"""smolalign's dependencies the GPU image holds at versions that work (the device's package list: torch 2.11 + CUDA 13,
transformers 5.17, accelerate 1.15, peft)."""
NOT_NEEDED = {"bitsandbytes": "imported only when a recipe quantizes the model (QLoRA); no GPU benchmark does"}
BUILT_HERE = {"deepspeed"}
"""Published as an sdist only: built into a wheel on this machine."""
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def pinned(name: str) -> str:
    """The version installed here (what the tests ran against); else pyproject.toml's requirement (an extra this
    machine does not install, such as Liger's GPU kernels)."""
    try:
        return f"{name}=={version(name)}"
    except PackageNotFoundError:
        pass
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = [*project["dependencies"], *(line for extra in project["optional-dependencies"].values() for line in extra)]
    declared = [line for line in lines if normalized(Requirement(line).name) == normalized(name)]
    if not declared:
        sys.exit(f"{name} is neither installed in {sys.executable} nor declared in pyproject.toml: run this with "
                 "the project's environment (.venv/bin/python, which `make test` creates)")
    return str(Requirement(declared[0]))


def download(requirements: list[str], dest: Path, python_version: str) -> None:
    platform_flags = [flag for platform in PLATFORMS for flag in ("--platform", platform)]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--python-version", python_version, "--implementation", "cp", *platform_flags, "-d", str(dest)]
    for requirement in requirements:  # one at a time, so that a failure names its distribution
        if subprocess.run([*command, requirement]).returncode:
            sys.exit(f"no wheel of {requirement} for CPython {python_version} on x86_64 manylinux")


def build(requirements: list[str], dest: Path) -> None:
    for requirement in requirements:
        with tempfile.TemporaryDirectory() as scratch:
            if subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", scratch,
                               requirement]).returncode:
                sys.exit(f"could not build a wheel of {requirement}")
            for wheel in Path(scratch).glob("*.whl"):
                if not wheel.name.endswith("-py3-none-any.whl"):
                    sys.exit(f"{wheel.name} is not pure Python: it would not install on the GPU machine")
                wheel.replace(dest / wheel.name)


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def remove_earlier(dest: Path) -> None:
    """Two versions of one distribution stop the whole install there: earlier downloads of these go."""
    carried = {normalized(name) for name in CARRIED}
    for wheel in dest.glob("*.whl"):
        if normalized(wheel.name.split("-")[0]) in carried:
            wheel.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=Path(".whl"))
    parser.add_argument("--python-version", default="3.12", help="the GPU machine's Python (its image: 3.12)")
    args = parser.parse_args()
    args.dest.mkdir(parents=True, exist_ok=True)
    requirements = [pinned(name) for name in CARRIED]
    remove_earlier(args.dest)
    download([r for r in requirements if r.split("==")[0] not in BUILT_HERE], args.dest, args.python_version)
    build([r for r in requirements if r.split("==")[0] in BUILT_HERE], args.dest)
    wheels = sorted(args.dest.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels) / 2**20
    print(f"{len(wheels)} wheels, {size:.1f} MiB, in {args.dest}:")
    for wheel in wheels:
        print(f"  {wheel.name}")


if __name__ == "__main__":
    main()
