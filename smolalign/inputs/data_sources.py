"""Loading one data source (local JSONL / JSON / Parquet files or folders, a hub dataset, or a reasoning-gym task
generated here: `reasoning_gym:TASK`) and mapping its columns."""

import json
import re
from importlib.metadata import version
from pathlib import Path

from rewards.reasoning_gym import task_of, task_rows
from smolalign import hub_access
from smolalign.errors import SmolalignError
from smolalign.jsonl import read_jsonl
from smolalign.progress import datasets_bars
from smolalign.recipe.data_schema import SourceSection

LOCAL_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


def local_files(path: Path, split: str = "train", name: str | None = None) -> list[Path]:
    """The files of `split` in a local file or folder. A folder's splits are the ones datasets reads from it: its
    README's `configs:` (a downloaded hub dataset; `name` picks one), else its file names (data/train-00000-of-00002
    .parquet, validation.jsonl, test_sft-*.parquet); a folder whose files name none is one train split. A single file
    is read whole: its split is train."""
    if not path.is_dir():
        if name is not None:
            raise SmolalignError(f"data source {path}: name {name!r} is a dataset's configuration, and a file is read "
                                 "whole: drop name")
        if path.suffix not in LOCAL_BUILDERS:
            raise SmolalignError(f"data source {path}: unsupported file type {path.suffix!r} (use .jsonl, .json or "
                                 ".parquet)")
        if split != "train":
            raise SmolalignError(f"data source {path}: split {split!r} picks a part of a dataset, and a file is read "
                                 "whole (its split is train): drop split, or point the source at that split's file")
        return [path]
    files = sorted(p for p in path.rglob("*") if p.suffix in LOCAL_BUILDERS and p.is_file()
                   and p.name not in DATASETS_METADATA and not any(part.startswith(".") for part in
                                                                    p.relative_to(path).parts))
    if not files:
        raise SmolalignError(f"data source {path}: the folder holds no .jsonl, .json or .parquet file")
    splits = folder_splits(path, files, name)
    named = {f for chosen in splits.values() for f in chosen}
    if name is None and (left := [f for f in files if f not in named]):  # a configuration reads some files only
        raise SmolalignError(f"data source {path}: {left[0].relative_to(path)} names no split, beside files that do "
                             f"({', '.join(sorted(splits))}): it would not be read; rename it, move it out, or point "
                             "the source at a file")
    if split not in splits:
        raise SmolalignError(f"data source {path}: no split {split!r} in this folder; its file names make the splits "
                             f"{', '.join(sorted(splits))}: set split: to one of them")
    for file in splits[split]:
        word = _HELD_OUT_NAME.search(file.stem.lower())
        if word and word.group(2) not in split.lower():
            raise SmolalignError(f"data source {path}: {file.relative_to(path)} is read as split {split!r}, but its "
                                 f"name says {word.group(2)}: a held-out file would be trained on. Name the files "
                                 "as datasets reads splits (train.jsonl, test.jsonl; lower case), or point the "
                                 "source at a file")
    return splits[split]


def folder_splits(path: Path, files: list[Path], name: str | None = None) -> dict[str, list[Path]]:
    """The folder's splits (of configuration `name`) as datasets resolves them, with the files among `files`."""
    import datasets

    try:
        found = datasets.load_dataset_builder(str(path), name).config.data_files or {}
    except ValueError as exc:  # several configurations and no name, or a name the folder does not have
        raise SmolalignError(f"data source {path}: {' '.join(str(exc).split())[:300]} (set name: to one)") from None
    ours = {f.resolve(): f for f in files}
    splits = {str(split): [ours[p] for p in sorted({Path(f).resolve() for f in chosen}) if p in ours]
              for split, chosen in found.items()}
    return {split: chosen for split, chosen in splits.items() if chosen}


DATASETS_METADATA = {"dataset_info.json", "dataset_infos.json", "dataset_dict.json", "state.json"}
"""Files a saved or downloaded dataset keeps beside its rows: not data, and datasets reads none of them as rows."""
_HELD_OUT_NAME = re.compile(r"(^|[^a-z])(test|eval|valid|validation|dev)(set)?([^a-z]|$)")
"""A file name that says it holds a held-out split (testset.jsonl, Test.jsonl, my-eval-data.jsonl)."""


def is_local(spec: str) -> bool:
    path = Path(spec).expanduser()
    return path.exists() or path.suffix in LOCAL_BUILDERS or spec.startswith((".", "/", "~"))


def check_json_file(path: Path) -> None:
    """A JSON file that datasets would misread: bytes that are not UTF-8 (they surface later, as a crash in
    whichever row holds them), a file with no rows (datasets' own words do not say so), or a .json file holding one
    object (datasets reads its keys as columns)."""
    if path.suffix not in (".jsonl", ".json"):
        return
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        row = data.count(b"\n", 0, exc.start)
        raise SmolalignError(f"data row {path}#{row}: not UTF-8 text (byte 0x{data[exc.start]:02x}); save the file "
                             "as UTF-8") from None
    if not data.strip() or data.strip() == b"[]":  # datasets says StopIteration, or "corresponds to no data"
        raise SmolalignError(f"data source {path}: holds no rows (the file is {'[]' if data.strip() else 'empty'})")
    if path.suffix == ".json" and data.lstrip()[:1] == b"{":
        try:
            whole = json.loads(data)
        except json.JSONDecodeError:
            return  # JSON lines in a .json file: datasets reads one row per line
        if isinstance(whole, dict):
            raise SmolalignError(f"data source {path}: holds one JSON object, not rows; write a list of rows "
                                 "([{...}, {...}]) or one row per line (.jsonl)")


def check_json_rows(path: Path) -> None:
    """The first line of a JSON-lines file that is not a JSON object, named file#row."""
    if path.suffix != ".jsonl":
        return
    for _ in read_jsonl(path, "data row"):
        pass


def files_stamp(files: list[Path], root: Path) -> str | None:
    """Each file's path under `root` (its name when it is the root), size and mtime; None for no file."""
    return ";".join(f"{p.relative_to(root) if p != root else p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
                    for p in files) or None


def rows_label(source: SourceSection) -> str:
    """A source's short name: its path, with its configuration, split and revision where they are not the default."""
    return source.path + (f":{source.name}" if source.name else "") + (
        f"[{source.split}]" if source.split != "train" else "") + (f"@{source.revision}" if source.revision else "")


def row_labels(sources: list[SourceSection]) -> list[str]:
    """What each source's rows are named by (`label#row`): its `rows_label`. Two sources reading the same rows (the
    same file twice, another weight) share it; one reading other rows under the same short name (a reasoning-gym task
    at another seed, size or config) gets its position too."""
    labels: list[str] = []
    by_rows: dict[tuple, str] = {}
    for index, source in enumerate(sources):
        short = rows_label(source)
        same_rows = (short, source.size, source.seed, json.dumps(source.config, sort_keys=True))
        if same_rows not in by_rows:
            by_rows[same_rows] = short if short not in by_rows.values() else f"{short} (source {index + 1})"
        labels.append(by_rows[same_rows])
    return labels


def source_labels(sources: list[SourceSection]) -> list[str]:
    """A name for each source that tells it from the others: its `rows_label`, and its position where two sources
    read the same rows."""
    labels: list[str] = []
    for index, source in enumerate(sources):
        label = rows_label(source)
        labels.append(label if label not in labels else f"{label} (source {index + 1})")
    return labels


def fingerprint_of(source: SourceSection) -> str:
    """What identifies a source's content without reading a hub dataset: files by path, size and mtime; a hub
    dataset by id, config, split and pinned revision; a reasoning-gym task by its settings and the library's
    version."""
    if task_of(source.path) is not None:
        settings = json.dumps([source.size, source.seed, source.config], sort_keys=True)
        return f"{source.path}:{settings}:reasoning-gym {version('reasoning-gym')}"
    if is_local(source.path):
        path = Path(source.path).expanduser()
        if not path.exists():
            raise SmolalignError(f"data source {source.path}: no such file or folder")
        return ";".join(f"{p.resolve()}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in local_files(path, source.split, source.name))
    return f"hub:{source.path}:{source.name}:{source.split}:{source.revision}"


def rows_fingerprint(source: SourceSection) -> str:
    """`fingerprint_of`, and for a hub dataset the fingerprint datasets gives the rows it reads (it follows the
    commit read: a dataset updated on the hub is another). Reads a hub dataset: for a run about to read it anyway."""
    if is_local(source.path) or task_of(source.path) is not None:
        return fingerprint_of(source)
    return f"{fingerprint_of(source)}:{load_source(source)._fingerprint}"


def load_source(source: SourceSection):
    """The source as a `datasets.Dataset`, columns selected and renamed as the recipe says."""
    import datasets

    datasets_bars()
    task, offline = task_of(source.path), None
    try:
        if task is not None:
            rows = task_rows(task, source.config, source.seed, source.size)
            dataset = datasets.Dataset.from_list(rows)
        elif is_local(source.path):
            path = Path(source.path).expanduser()
            if not path.exists():
                raise SmolalignError(f"data source {source.path}: no such file or folder")
            if source.revision is not None:
                raise SmolalignError(f"data source {source.path}: revision picks a hub dataset's commit, and local "
                                     "files are read as they are: drop revision")
            files = local_files(path, source.split, source.name)
            builders = {LOCAL_BUILDERS[f.suffix] for f in files}
            if len(builders) > 1:
                raise SmolalignError(f"data source {source.path}: mixes JSON and Parquet files; split it into two sources")
            for file in files:
                check_json_file(file)
            verbosity = datasets.logging.get_verbosity()
            datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # a row it cannot parse is logged with a traceback first
            try:
                dataset = datasets.load_dataset(builders.pop(), data_files=[str(f) for f in files], split="train")
            except Exception:
                for file in files:
                    check_json_rows(file)  # names the row datasets could not read, if it is one
                raise
            finally:
                datasets.logging.set_verbosity(verbosity)
        else:
            offline = hub_access.offline_reason()  # asked before datasets' first request, so that nothing retries
            dataset = datasets.load_dataset(source.path, source.name, split=source.split, revision=source.revision)
    except SmolalignError:
        raise
    except Exception as exc:  # datasets raises many types (DatasetGenerationError, ConnectionError, FileNotFoundError)
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        cause = exc.__cause__ or exc.__context__
        if cause is not None and str(cause):
            message += f": {str(cause).splitlines()[0]}"
        if offline:  # the library's own words only repeat it
            raise SmolalignError(f"data source {source.path}: not in the local datasets cache, and {offline}; "
                                 "load it once where the hub answers, or point the source at local files") from None
        raise SmolalignError(f"data source {source.path}: could not be loaded ({message})") from None
    return select_columns(dataset, source)


def select_columns(dataset, source: SourceSection):
    """Apply `columns:` (a list keeps, a mapping keeps and renames); a missing column names the source."""
    if source.columns is None:
        return dataset
    wanted = list(source.columns) if isinstance(source.columns, list) else list(source.columns.keys())
    for column in wanted:
        if column not in dataset.column_names:
            raise SmolalignError(
                f"data source {source.path} has no column {column!r} (columns: {', '.join(dataset.column_names)})")
    dataset = dataset.select_columns(wanted)
    if isinstance(source.columns, dict):
        dataset = dataset.rename_columns({k: v for k, v in source.columns.items() if k != v})
    return dataset
