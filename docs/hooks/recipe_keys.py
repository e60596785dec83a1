"""The recipe-keys reference page, written from the schema at build time: every key a recipe can hold, with its type,
default and the attribute docstring under its field (smolalign/recipe/schema.py, data_schema.py, eval_schema.py,
generation_schema.py), then the `train:` method table and ranges. Build: `make docs`."""

import ast
import dataclasses
import inspect
import textwrap
import typing
from typing import Any

import yaml
from markdown_text import code, table

PARSED_KEYS = ("method", "reference")
"""Top-level keys whose YAML form (a name, list or mapping) is parsed by smolalign/recipe/method_keys.py into a dataclass
that is not written as such in a recipe: their table row is the `Recipe` field's docstring, their fields are not
listed."""


@dataclasses.dataclass(frozen=True)
class Key:
    path: str
    """Dotted recipe path (`data.sources[].weight`)."""
    type: str
    default: str
    doc: str
    owner: type
    """The dataclass the key is a field of (for the missing-docstring check)."""
    same_as: str = ""
    """Where the keys of this section's dataclass were listed already, when they were."""


def attribute_docs(cls: type) -> dict[str, str]:
    """Each field's attribute docstring (the string literal right under it in the class body), by field name."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body
    docs = {}
    for node, following in zip(body, body[1:] + [None], strict=True):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant) and isinstance(following.value.value, str)):
            docs[node.target.id] = inspect.cleandoc(following.value.value)
    return docs


def _sections() -> list[tuple[str, str]]:
    """(recipe key, the stages that accept it) for every top-level key, in the validator's order."""
    from smolalign.recipe.schema import STAGES
    from smolalign.recipe.validate import SECTIONS, STAGE_SECTIONS

    keys = [(key, ", ".join(STAGES)) for key in SECTIONS]
    for key in dict.fromkeys(k for keys_ in STAGE_SECTIONS.values() for k in keys_):
        keys.append((key, ", ".join(stage for stage, names in STAGE_SECTIONS.items() if key in names)))
    return keys


def _recipe_field(key: str) -> str:
    return {"eval": "evaluation"}.get(key, key)


def _section_type(key: str) -> Any:
    """The annotation a top-level key is built from."""
    from smolalign.recipe.schema import Recipe

    return typing.get_type_hints(Recipe)[_recipe_field(key)]


def _dataclass_in(annotation: Any) -> tuple[type | None, str]:
    """(the section dataclass inside an annotation, "[]" when it is a list of them) or (None, "")."""
    if dataclasses.is_dataclass(annotation):
        return annotation, ""
    args = [a for a in typing.get_args(annotation) if a is not type(None) and a is not Ellipsis]
    origin = typing.get_origin(annotation)
    if len(args) == 1:
        inner, suffix = _dataclass_in(args[0])
        return inner, ("[]" if origin in (list, tuple) else "") + suffix
    return None, ""


def _describe(annotation: Any) -> str:
    from smolalign.recipe.typecheck import describe

    inner, suffix = _dataclass_in(annotation)
    if inner is not None:
        return "a list of mappings" if suffix else "a mapping"
    return describe(annotation)


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if dataclasses.is_dataclass(value):
        return "its keys' defaults"
    return yaml.safe_dump(value, default_flow_style=True, width=1000).strip().removesuffix("...").strip()


def keys() -> list[Key]:
    """Every key of a recipe: the top-level sections, then each section dataclass's fields, nested sections
    expanded once (a dataclass met again points to where it was listed)."""
    from smolalign.recipe.schema import Recipe

    recipe_docs = attribute_docs(Recipe)
    out, listed = [], {}
    for key, stages in _sections():
        annotation = _section_type(key)
        doc = recipe_docs.get(_recipe_field(key), "")
        out.append(Key(key, "see description" if key in PARSED_KEYS else _describe(annotation), "-",
                       f"({stages}) {doc}" if doc else "", Recipe))
        inner, suffix = _dataclass_in(annotation)
        if inner is not None and key not in PARSED_KEYS:
            _fields(inner, key + suffix, out, listed)
    return out


def _fields(cls: type, prefix: str, out: list[Key], listed: dict[type, str]) -> None:
    if cls in listed:
        return
    listed[cls] = prefix
    docs = attribute_docs(cls)
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        annotation = hints[field.name]
        path = f"{prefix}.{field.name}"
        inner, suffix = _dataclass_in(annotation)
        same_as = listed.get(inner, "") if inner is not None else ""
        out.append(Key(path, _describe(annotation), _default(field), docs.get(field.name, ""), cls, same_as))
        if inner is not None:
            _fields(inner, path + suffix, out, listed)


def missing_docs() -> list[str]:
    """Keys whose field has no docstring (the reference would show an empty description)."""
    return [f"{key.owner.__name__}.{key.path.rsplit('.', 1)[-1]} ({key.path})" for key in keys() if not key.doc]


def imported_class(loader) -> str:
    """`module.Class` that a class-loading function of the method tables imports, read from its source: the page
    names TRL's classes without importing trl (and GRPO's trainer, vLLM)."""
    [node] = [n for n in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(loader)))) if isinstance(n, ast.ImportFrom)]
    return f"{node.module}.{node.names[0].name}"


def _methods_table() -> str:
    from smolalign.recipe.method_table import METHODS
    rows = [[name, spec.stage, code(imported_class(spec.config_class)), code(imported_class(spec.trainer)),
             ", ".join(f"`{k}`" for k in spec.refused)] for name, spec in METHODS.items()]
    return table(["method", "verb", "`train:` is checked against", "trainer", "`train:` keys smolalign sets itself"],
                 rows)


def _ranges_table() -> str:
    from smolalign.recipe.train_section import RANGES

    return table(["`train:` key", "accepted values"], [[f"`{k}`", r.describe()] for k, r in sorted(RANGES.items())])


def page() -> str:
    rows = [[f"`{k.path}`", k.type, k.default, k.doc + (f" The same keys as `{k.same_as}`." if k.same_as else "")]
            for k in keys()]
    return "\n".join([
        "# Recipe keys",
        "",
        "Generated from the schema (`smolalign/recipe/schema.py`, `data_schema.py`, `eval_schema.py`, `generation_schema.py`) when the "
        "site is built. How recipes are read, composed and overridden: [Recipe files](../recipes/index.md). "
        "`a[]` is a list whose items take the keys listed under `a[].`; a top-level section starts with the verbs "
        "that accept it.",
        "",
        table(["key", "type", "default", "description"], rows),
        "## `train:`: the method's TRL config",
        "",
        "`train:` passes through to the TRL config class of the recipe's method, checked against its fields (unknown "
        "keys get a did-you-mean, values are type-checked), so every TRL field is a recipe key: see "
        "[TRL's documentation](https://huggingface.co/docs/trl/index) for each class. `peft:` passes through to "
        "`peft.LoraConfig` the same way. Keys that smolalign sets from its own sections are refused with where to "
        "set them instead.",
        "",
        _methods_table(),
        "Numeric `train:` values are also checked against these ranges before any weight loads (and every float "
        "must be finite):",
        "",
        _ranges_table(),
    ])
