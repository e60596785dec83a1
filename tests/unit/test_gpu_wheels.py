"""benchmarks/gpu_wheels.py lists what an offline GPU machine needs beyond its image: a dependency added to
pyproject.toml without a place in that list would fail the GPU benchmarks at import, on the GPU's clock."""

import importlib
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def wheels(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    yield importlib.import_module("gpu_wheels")
    sys.modules.pop("gpu_wheels", None)


def test_every_dependency_is_in_the_image_carried_or_said_to_be_unneeded(wheels):
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    needed = [Requirement(line).name for line in project["dependencies"]]
    needed += [Requirement(line).name for extra in ("deepspeed", "liger")
               for line in project["optional-dependencies"][extra]]
    placed = {wheels.normalized(name) for name in (*wheels.IN_THE_IMAGE, *wheels.CARRIED, *wheels.NOT_NEEDED)}
    assert [name for name in needed if wheels.normalized(name) not in placed] == []


def test_earlier_downloads_of_a_carried_distribution_go_and_others_stay(wheels, tmp_path):
    for name in ("trl-1.15.0-py3-none-any.whl", "pydantic_core-2.40.1-cp312-cp312-manylinux_2_17_x86_64.whl",
                 "Typing_Extensions-4.14.0-py3-none-any.whl", "vllm-0.31.0-cp38-abi3-manylinux_2_31_x86_64.whl"):
        (tmp_path / name).write_bytes(b"")
    wheels.remove_earlier(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["vllm-0.31.0-cp38-abi3-manylinux_2_31_x86_64.whl"]
