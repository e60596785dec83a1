"""`smolalign recipes cp NAME DEST`: a shipped recipe copied to edit, with the data files it names next to it.

The recipe text is copied as is (its comments are the documentation); every relative path in it that names a file
next to the shipped recipe (its data, and a recipe it extends by a relative path, with that recipe's own data) is
copied to the same relative place under DEST's folder, where the copy resolves it the same way. Paths that name run outputs (runs/...) stay relative to where you run.
"""

import copy
import os
import shutil
from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.recipe.load import _absolutize_paths, recipe_path, shipped_recipes
from smolalign.recipe.typecheck import suggest
from smolalign.recipe.yamlio import load_yaml


def local_files(path: Path) -> dict[str, Path]:
    """Relative path as written in the recipe -> the file or folder next to the shipped recipe."""
    written = load_yaml(path.read_text(), source=str(path)) or {}
    resolved = copy.deepcopy(written)
    _absolutize_paths(resolved, path.parent)
    found: dict[str, Path] = {}

    def walk(before, after) -> None:
        if isinstance(before, dict):
            for key in before:
                walk(before[key], after.get(key))
        elif isinstance(before, list):
            for a, b in zip(before, after, strict=True):
                walk(a, b)
        elif isinstance(before, str) and before != after:
            found[before] = Path(after)

    walk(written, resolved)
    parents = written.get("extends") if isinstance(written, dict) else None
    for parent in [parents] if isinstance(parents, str) else parents if isinstance(parents, list) else []:
        origin = path.parent / parent if isinstance(parent, str) and not Path(parent).is_absolute() else None
        if origin is None or not origin.is_file():
            continue  # a shipped name (quickstart/po): the copy finds it where this one did
        found[parent] = origin  # a recipe next to this one: copied with its own files, or the copy extends nothing
        for inner, inner_origin in local_files(origin).items():
            found.setdefault(os.path.normpath(os.path.join(os.path.dirname(parent), inner)), inner_origin)
    return found


def copy_shipped(name: str, dest: Path) -> tuple[Path, list[Path]]:
    """Copy shipped recipe `name` to `dest` (a .yaml file, or a folder to put it in, created if needed); returns
    (recipe, data files)."""
    shipped = shipped_recipes()
    key = name.removesuffix(".yaml").removesuffix(".yml")
    if key not in shipped:
        raise SmolalignError(f"no shipped recipe {name!r}{suggest(key, shipped)}; `smolalign recipes list` shows them")
    source = recipe_path(key)
    folder = dest.is_dir() or dest.suffix not in (".yaml", ".yml")
    target = dest / source.name if folder else dest
    if target.exists():
        raise SmolalignError(f"{target} exists; remove it or give another DEST")
    files = local_files(source)
    plans = []
    for written, origin in files.items():
        copied = target.parent / written
        if copied.resolve() == target.resolve():
            raise SmolalignError(f"{target}: the copy of {name} would overwrite the copy of {written}, which it "
                                 f"extends; give the copy another name")
        if copied.exists() and not _same(origin, copied):
            raise SmolalignError(f"{copied} exists and differs from the shipped {written}; remove it or copy "
                                 "elsewhere")
        plans.append((origin, copied))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        for origin, copied in plans:
            copied.parent.mkdir(parents=True, exist_ok=True)
            if origin.is_dir():
                shutil.copytree(origin, copied, dirs_exist_ok=True)
            elif not copied.exists():
                shutil.copy2(origin, copied)
        shutil.copy2(source, target)
    except OSError as exc:  # a file where a folder should be, no permission, a full disk
        raise SmolalignError(f"{exc.filename or target}: cannot be written ({exc.strerror or exc})") from None
    return target, [c for _, c in plans]


def _same(a: Path, b: Path) -> bool:
    if a.is_dir() or b.is_dir():
        return a.is_dir() and b.is_dir()
    return a.read_bytes() == b.read_bytes()
