"""What a run reads that its recipe names but does not pin: the content of its data files and of its local model
folders (the policy's, a reference's, a teacher's), stamped by path, size and modification time, as the prepared-data
cache keys data, in the manifest when the run starts. A resume compares them: a file rewritten in place since the
interruption would have the steps after the checkpoint train on other rows, or against another reference or teacher,
under the same recipe, without a word."""

import sys
from pathlib import Path

from smolalign.inputs.data_sources import fingerprint_of
from smolalign.runs.manifest import read_manifest

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def model_stamp(location: str) -> str | None:
    """A local model's weight files (a folder's, or a .gguf file) by name, size and mtime; None for a hub id."""
    path = Path(location).expanduser()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in WEIGHT_SUFFIXES
                                                   and p.is_file()) if path.is_dir() else []
    return ";".join(f"{p.relative_to(path) if p != path else p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
                    for p in files) or None


def input_stamps(run) -> dict[str, str]:
    """Each data source's and each local model's stamp, by the recipe key that names it."""
    recipe = run.recipe
    stamps = {f"data.sources.{i}": fingerprint_of(source) for i, source in enumerate(run.data.sources)}
    roles = {"model.source": "model", "reference.source": "reference" if recipe.reference is not None
             and recipe.reference.kind == "source" else None, "teacher.source": "teacher" if recipe.teacher else None}
    for key, role in roles.items():
        stamp = model_stamp(run.source(role).location) if role else None
        if stamp:
            stamps[key] = stamp
    return stamps


def stamped_inputs(run, run_dir: Path, resuming: bool) -> dict[str, str]:
    """The run's input stamps for its manifest; resuming, a warning for each input whose content changed since the
    run started (the stamps its manifest holds)."""
    stamps = input_stamps(run)
    before = read_manifest(run_dir).get("inputs") or {} if resuming else {}
    for key in (k for k in stamps if k in before and before[k] != stamps[k]):
        print(f"warning: --resume: the content of {key} changed since {run_dir} started (a file rewritten in place); "
              "the steps after the checkpoint train on the new content, those before it trained on the old",
              file=sys.stderr)
    return stamps
