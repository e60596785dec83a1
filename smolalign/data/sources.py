"""Loading one data source (local JSONL / JSON / Parquet files or folders, or a hub dataset) and mapping its columns."""

from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.recipe.schema import SourceSection

LOCAL_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


def local_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in LOCAL_BUILDERS and p.is_file())
        if not files:
            raise SmolalignError(f"data source {path}: the folder holds no .jsonl, .json or .parquet file")
        return files
    if path.suffix not in LOCAL_BUILDERS:
        raise SmolalignError(f"data source {path}: unsupported file type {path.suffix!r} (use .jsonl, .json or .parquet)")
    return [path]


def is_local(spec: str) -> bool:
    path = Path(spec).expanduser()
    return path.exists() or path.suffix in LOCAL_BUILDERS or spec.startswith((".", "/", "~"))


def fingerprint_of(source: SourceSection) -> str:
    """What identifies a source's content: files by path, size and mtime; hub datasets by id, config and split."""
    if is_local(source.path):
        path = Path(source.path).expanduser()
        if not path.exists():
            raise SmolalignError(f"data source {source.path}: no such file or folder")
        return ";".join(f"{p.resolve()}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in local_files(path))
    return f"hub:{source.path}:{source.name}:{source.split}"


def load_source(source: SourceSection):
    """The source as a `datasets.Dataset`, columns selected and renamed as the recipe says."""
    import datasets

    from smolalign.progress import datasets_bars

    datasets_bars()
    try:
        if is_local(source.path):
            path = Path(source.path).expanduser()
            if not path.exists():
                raise SmolalignError(f"data source {source.path}: no such file or folder")
            files = local_files(path)
            builders = {LOCAL_BUILDERS[f.suffix] for f in files}
            if len(builders) > 1:
                raise SmolalignError(f"data source {source.path}: mixes JSON and Parquet files; split it into two sources")
            dataset = datasets.load_dataset(builders.pop(), data_files=[str(f) for f in files], split="train")
        else:
            dataset = datasets.load_dataset(source.path, source.name, split=source.split)
    except SmolalignError:
        raise
    except Exception as exc:  # datasets raises many types (DatasetGenerationError, ConnectionError, FileNotFoundError)
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        cause = exc.__cause__ or exc.__context__
        if cause is not None and str(cause):
            message += f": {str(cause).splitlines()[0]}"
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
