"""YAML reading and writing with YAML 1.2 floats (plain PyYAML reads `lr: 2e-5` as the string '2e-5'), and a key
written twice in one mapping refused instead of the last one silently winning."""

import re
from typing import Any

import yaml

from smolalign.errors import SmolalignError


class _Loader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        """A key written twice in one mapping is an error: PyYAML would keep the last one silently."""
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` then an override is not a duplicate
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (the later value would silently win)", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# YAML 1.1's float rule requires a dot ("2.0e-5"); this is the YAML 1.2 rule, so "2e-5" and "1e6" are floats.
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def load_yaml(text: str, source: str = "<string>") -> Any:
    """Parse YAML text; a syntax error becomes a SmolalignError naming the source and line."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None and "\n" in text.strip() else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise SmolalignError(f"{source}{where}: invalid YAML ({problem})") from None


def printable(text: str) -> str:
    """`text` as a one-line message shows it: as it is, or quoted with escapes when it holds a newline, a tab or
    another character that does not print."""
    return text if text.isprintable() else repr(text)


def parse_value(text: str, option: str = "--set value") -> Any:
    """A `--set` value, typed as YAML would type it (`3` -> int, `2e-5` -> float, `[a, b]` -> list); a value that is
    not YAML is an error naming `option` (`--set train.learning_rate`)."""
    if text == "":
        return ""
    return load_yaml(text, source=option)


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
