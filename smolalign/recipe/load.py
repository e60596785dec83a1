"""Reading a recipe: shipped names or paths, `extends:` with deep merge, `--set` overrides, relative paths.

Only the stdlib and yaml are imported here, so the CLI can resolve recipes without loading torch.
"""

import copy
from pathlib import Path
from typing import Any

from smolalign.assets import asset_dir
from smolalign.errors import SmolalignError
from smolalign.recipe.typecheck import suggest
from smolalign.recipe.yamlio import load_yaml, parse_value, printable

RECIPE_SUFFIXES = (".yaml", ".yml")


def shipped_recipes() -> dict[str, Path]:
    """Shipped recipe names (`quickstart/sft`) and their files."""
    root = asset_dir("recipes")
    if not root.is_dir():
        return {}
    found = {}
    for path in sorted(root.rglob("*")):
        if path.suffix in RECIPE_SUFFIXES and path.is_file() and "accelerate" not in path.relative_to(root).parts:
            found[path.relative_to(root).with_suffix("").as_posix()] = path
    return found


def shipped_file(name: str) -> Path | None:
    """A file shipped with the recipes, by its name under them (`quickstart/data/arithmetic_eval.jsonl`), for a
    command's path that is not there from where it runs; None when there is no such file."""
    if Path(name).is_absolute() or ".." in Path(name).parts:
        return None
    candidate = asset_dir("recipes") / name
    return candidate if candidate.is_file() else None


def header_comment(path: Path) -> list[str]:
    """The comment lines that open a recipe file (what it trains, the hardware, the command), without their `#`."""
    lines: list[str] = []
    for line in path.read_text().splitlines():
        if not line.strip() and not lines:
            continue
        if not line.startswith("#"):
            break
        lines.append(line[1:].removeprefix(" ").rstrip())
    return lines


def recipe_path(name_or_path: str | Path, relative_to: Path | None = None) -> Path:
    """A recipe file: an existing path (tried next to `relative_to` first), else a shipped recipe name."""
    candidate = Path(name_or_path).expanduser()
    for base in ([relative_to] if relative_to else []) + [Path.cwd()]:
        full = candidate if candidate.is_absolute() else base / candidate
        if full.is_file():
            return full.resolve()
    shipped = shipped_recipes()
    name = str(name_or_path).removesuffix(".yaml").removesuffix(".yml")
    if name in shipped:
        return shipped[name]
    raise SmolalignError(f"recipe {printable(str(name_or_path))}: no such file and no shipped recipe of that name{suggest(name, shipped)}")


def deep_merge(base: dict, override: dict) -> dict:
    """`override` on top of `base`: mappings merge key by key, everything else (lists included) is replaced."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def read_recipe(name_or_path: str | Path, *, _chain: tuple[Path, ...] = (), _relative_to: Path | None = None) -> dict:
    """The merged mapping of a recipe and everything it `extends:`, with file paths made absolute."""
    path = recipe_path(name_or_path, _relative_to)
    if path in _chain:
        cycle = " -> ".join(str(p) for p in (*_chain, path))
        raise SmolalignError(f"recipe extends itself: {cycle}")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SmolalignError(f"{path}: not a UTF-8 text file (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                             "a recipe is YAML text") from None
    data = load_yaml(text, source=str(path))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SmolalignError(f"{path}: a recipe must be a mapping of sections, got {type(data).__name__}")
    _absolutize_paths(data, path.parent)
    parents = data.pop("extends", None)
    if parents is None:
        return data
    if isinstance(parents, str):
        parents = [parents]
    if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
        raise SmolalignError(f"{path}: extends must be a recipe name or path, or a list of them")
    merged: dict = {}
    for parent in parents:
        merged = deep_merge(merged, read_recipe(parent, _chain=(*_chain, path), _relative_to=path.parent))
    return deep_merge(merged, data)


def _absolutize_paths(data: dict, base: Path) -> None:
    """Relative file paths in a recipe point next to the recipe when such a file exists there.

    So a recipe and its data can move together, and a recipe that extends it still finds that data.
    """

    def fix(value: Any) -> Any:
        if isinstance(value, str) and value and not Path(value).is_absolute():
            candidate = base / value
            if candidate.exists():
                return str(candidate.resolve())
        return value

    def fix_key(block: Any, key: str) -> None:
        if isinstance(block, dict) and key in block:
            block[key] = fix(block[key])

    def fix_paths(sources: Any) -> None:
        for source in sources if isinstance(sources, list) else ():
            fix_key(source, "path")

    fix_key(data.get("model"), "source")
    fix_key(data.get("template"), "name")
    for section in ("data", "eval_data"):
        block = data.get(section)
        if isinstance(block, dict):
            fix_paths(block.get("sources"))
    fix_key(data.get("reference"), "source")
    pairs = data.get("pairs")
    if isinstance(pairs, dict):
        fix_paths(pairs.get("prompts"))
        for side in ("strong", "weak"):
            fix_key(pairs.get(side), "source")
        graded = pairs.get("graded")
        if isinstance(graded, dict):
            fix_key(graded.get("sampler"), "source")
    evaluation = data.get("eval")
    if isinstance(evaluation, dict):
        fix_paths(evaluation.get("data"))
        fix_key(evaluation, "template")


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """`--set a.b=c` values, typed as YAML types them; `data.sources.0.weight=2` indexes into lists."""
    result = copy.deepcopy(raw)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise SmolalignError(f"--set {item!r}: expected KEY=VALUE, e.g. train.learning_rate=1e-5")
        parts = key.strip().split(".")
        if not all(part.strip() for part in parts):
            raise SmolalignError(f"--set {item!r}: the key {key.strip()!r} has an empty part; write dotted keys like "
                                 "train.learning_rate")
        value = parse_value(text, f"--set {printable(f'{key.strip()}={text}')}")
        node: Any = result
        for depth, part in enumerate(parts[:-1]):
            where = ".".join(parts[: depth + 1])
            if isinstance(node, list):
                node = node[_list_index(part, node, where)]
            elif isinstance(node, dict):
                node = node.setdefault(part, {})
            else:
                raise SmolalignError(f"--set {key}: {where} is not a section")
        last = parts[-1]
        if isinstance(node, list):
            node[_list_index(last, node, key)] = value
        elif isinstance(node, dict):
            node[last] = value
        else:
            raise SmolalignError(f"--set {key}: {'.'.join(parts[:-1])} is not a section")
    return result


def _list_index(part: str, node: list, where: str) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise SmolalignError(f"--set {where}: expected an index below {len(node)}")
    return int(part)
