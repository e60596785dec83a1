"""What a run reads that its recipe names but does not pin: the content of its local data files and model folders
(the policy's, a reference's, a teacher's), stamped by file name, size and modification time in the manifest when
the run starts, and each hub dataset's rows (datasets' fingerprint of them, which follows the commit read). A resume
compares them: a file rewritten in place since the interruption, or a dataset updated on the hub, would have the
steps after the checkpoint train on other rows, or against another reference or teacher, under the same recipe,
without a word. Names, not paths: a project moved to another folder is not a change."""

import sys
from pathlib import Path

from rewards.reasoning_gym import task_of
from smolalign.inputs.data_sources import files_stamp, is_local, local_files, rows_fingerprint, source_labels
from smolalign.runs.manifest import read_manifest

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def model_stamp(location: str) -> str | None:
    """A local model's weight files (a folder's, or a .gguf file); None for a hub id."""
    path = Path(location).expanduser()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in WEIGHT_SUFFIXES
                                                   and p.is_file()) if path.is_dir() else []
    return files_stamp(files, path)


def input_stamps(run) -> dict[str, str]:
    """Each local data source's and each local model's stamp, by what names it (the source's path as the recipe
    writes it, the model's recipe key)."""
    recipe = run.recipe
    stamps = {}
    for source, label in zip(run.data.sources, source_labels(run.data.sources), strict=True):
        if task_of(source.path) is not None:
            continue  # generated from the recipe's settings
        if not is_local(source.path):
            stamps[f"data source {label}"] = rows_fingerprint(source)
        elif Path(source.path).expanduser().exists():
            path = Path(source.path).expanduser()
            stamp = files_stamp(local_files(path, source.split, source.name), path)
            if stamp:
                stamps[f"data source {label}"] = stamp
    roles = {"model.source": "model", "reference.source": "reference" if recipe.reference is not None
             and recipe.reference.kind == "source" else None, "teacher.source": "teacher" if recipe.teacher else None}
    for key, role in roles.items():
        stamp = model_stamp(run.source(role).location) if role else None
        if stamp:
            stamps[key] = stamp
    return stamps


def stamped_inputs(run, run_dir: Path, resuming: bool) -> dict[str, str]:
    """The run's input stamps for its manifest; resuming, a warning for each input whose files changed in size or
    modification time since the run started (the stamps its manifest holds)."""
    stamps = input_stamps(run)
    before = read_manifest(run_dir).get("inputs") or {} if resuming else {}
    for key in (k for k in stamps if k in before and before[k] != stamps[k]):
        print(f"warning: --resume: the files of {key} changed since {run_dir} started (in size or modification "
              "time: rewritten, or copied anew; a hub dataset: another commit); the steps after the checkpoint train "
              "on them as they are now, those before it trained on them as they were", file=sys.stderr)
    return stamps
