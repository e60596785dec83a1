"""Building dataclasses from recipe mappings: unknown keys with a did-you-mean, values checked against annotations.

The same checks serve smolalign's own sections and TRL's config classes (the `train:` section), so a typo or a
wrong type is caught before anything heavy loads and is reported as `section.key`.
"""

import dataclasses
import enum
import types
import typing
from typing import Any, Literal, Union

from rewards.errors import suggest  # the one did-you-mean, shared with the rewards
from smolalign.errors import SmolalignError
from smolalign.recipe.upstream import rename_hint


def reject_unknown(mapping: dict, known: typing.Iterable[str], where: str) -> None:
    known = list(known)
    for key in mapping:
        if key not in known and rename_hint(key):
            raise SmolalignError(f"unknown key {_join(where, key)}: {rename_hint(key)}")
        if key not in known:
            raise SmolalignError(f"unknown key {_join(where, key)}{suggest(str(key), known)}")


def _join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def describe(annotation: Any) -> str:
    """What an annotation accepts, in words ("one of 'a', 'b'", "a string or null"): for error messages and the
    recipe-keys reference page."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(annotation))
    if origin in (Union, types.UnionType):
        return " or ".join(describe(a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        return {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
                "dict": "a mapping", "list": "a list"}.get(annotation.__name__, annotation.__name__)
    if origin is not None:
        return describe(origin)
    return str(annotation)


def matches(value: Any, annotation: Any) -> bool:
    """Whether a YAML value fits an annotation. Annotations this does not understand accept anything."""
    if annotation is Any or annotation is object:
        return True
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        return any(matches(value, a) for a in args)
    if origin is Literal:
        return value in args
    if origin in (list, tuple, typing.Sequence, set):
        return isinstance(value, list) and (not args or all(matches(v, args[0]) for v in value))
    if origin in (dict, typing.Mapping):
        return isinstance(value, dict)
    if annotation is type(None) or annotation is None:
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        if isinstance(value, list | dict):  # unhashable: no member's value
            return False
        return value in {m.value for m in annotation} or value in annotation.__members__
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return isinstance(value, dict)
    if annotation in (dict, list):
        return isinstance(value, annotation)
    return True


YAML_BOOLEAN_WORDS = {True: ("yes", "on", "true"), False: ("no", "off", "false")}
"""What YAML 1.1, which PyYAML reads, turns into a boolean when it is not quoted."""


def check_value(value: Any, annotation: Any, where: str) -> None:
    if not matches(value, annotation):
        raise SmolalignError(f"{where} must be {describe(annotation)}, got {value!r}{_boolean_hint(value, annotation)}")


def _boolean_hint(value: Any, annotation: Any) -> str:
    """For a boolean where the field takes words: which word YAML turned into it, and that it needs quotes."""
    if not isinstance(value, bool):
        return ""
    words = YAML_BOOLEAN_WORDS[value]
    allowed = [word for word in words if matches(word, annotation)]
    if not allowed:
        return ""
    said = "/".join(words[:2])
    if len(allowed) == 1 and not matches("any other word", annotation):
        return f' (YAML reads an unquoted {said} as a boolean: write "{allowed[0]}" in quotes)'
    return f" (YAML reads an unquoted {said} as a boolean: quote the word you meant)"


def field_types(cls: type) -> dict[str, Any]:
    """Resolved annotations of a dataclass's init fields (TRL configs use `from __future__ import annotations`)."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve in this environment: check nothing for it
        hints = {}
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls) if f.init}


def build(cls: type, mapping: Any, where: str) -> Any:
    """`cls(**mapping)` for one of smolalign's own section dataclasses, nested sections included."""
    if mapping is None:
        mapping = {}
    if not isinstance(mapping, dict):
        raise SmolalignError(f"{where} must be a mapping, got {mapping!r}")
    fields = field_types(cls)
    reject_unknown(mapping, fields, where)
    values = {}
    for key, value in mapping.items():
        annotation = fields[key]
        values[key] = _build_value(value, annotation, _join(where, key))
    missing = [f.name for f in dataclasses.fields(cls) if f.init and f.name not in values
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise SmolalignError(f"{_join(where, missing[0])} is required")
    try:
        return cls(**values)
    except (ValueError, TypeError) as exc:
        raise SmolalignError(f"{where}: {exc}") from None


def _build_value(value: Any, annotation: Any, where: str) -> Any:
    inner = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = typing.get_origin(annotation) in (Union, types.UnionType)
    target = inner[0] if optional and len(inner) == 1 else annotation
    if value is not None and isinstance(target, type) and dataclasses.is_dataclass(target):
        return build(target, value, where)
    if typing.get_origin(target) is list:
        item = typing.get_args(target)[0] if typing.get_args(target) else Any
        if isinstance(item, type) and dataclasses.is_dataclass(item) and isinstance(value, list):
            return [build(item, v, f"{where}.{i}") for i, v in enumerate(value)]
    check_value(value, annotation, where)
    return value


def check_config_section(cls: type, mapping: dict, where: str, extra: typing.Iterable[str] = ()) -> None:
    """Unknown keys and types of a pass-through section (e.g. `train:` -> SFTConfig) without building it."""
    fields = field_types(cls)
    reject_unknown(mapping, [*fields, *extra], where)
    for key, value in mapping.items():
        if key in fields and value is not None:
            check_value(value, fields[key], _join(where, key))
