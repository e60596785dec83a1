"""smolalign's and rewards' imports, read from every module's AST: for each import, the module it names (a module of
the two packages, or the top-level name of another package) and whether it sits inside a function. An import inside a
function counts as much as one at the top: it only defers what it ties together."""

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("smolalign", "rewards")


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    """A module of smolalign or rewards (`from pkg import module` names the module), else a package's top name."""
    internal: bool
    in_function: bool
    line: int


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of smolalign and rewards, by name."""
    return {module_name(path, root): path for package in PACKAGES for path in sorted((root / package).rglob("*.py"))}


def _known(name: str, known: set[str]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_in(path: Path, known: set[str], root: Path = ROOT) -> list[Import]:
    """The imports of one module, each with the module it names and where it sits."""
    importer = module_name(path, root)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in child.names]
            else:
                visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))
                continue
            for name in dict.fromkeys(names):
                module = _known(name, known)
                found.append(Import(importer, module or name.split(".")[0], module is not None, in_function,
                                    child.lineno))

    visit(ast.parse(path.read_text()), False)
    return found


def all_imports(root: Path = ROOT) -> list[Import]:
    files = module_files(root)
    known = set(files)
    return [found for path in files.values() for found in imports_in(path, known, root)]
