"""The rewards reference page, written at build time from rewards/registry.py: every built-in reward (and
`model:PATH`) with its parameters, their defaults and the `Args:` entries of the reward class's docstring.
Build: `make docs`."""

import inspect
import re

from markdown_text import cell, code, table

_ENTRY = re.compile(r"^(\w+)(?: \([^)]*\))?: (.*)$")
MODEL_REWARD = "model:PATH"


def split_docstring(cls: type) -> tuple[str, dict[str, str]]:
    """(the docstring before `Args:`, each `Args:` entry's text by parameter name)."""
    doc = inspect.getdoc(cls) or ""
    summary, _, args = doc.partition("\nArgs:\n")
    entries: dict[str, str] = {}
    current = None
    for line in args.splitlines():
        match = _ENTRY.match(line.strip()) if not line.startswith("        ") else None
        if match:
            current = match.group(1)
            entries[current] = match.group(2)
        elif current and line.strip():
            entries[current] += " " + line.strip()
    return summary.strip(), entries


def parameters(cls: type) -> list[inspect.Parameter]:
    """The parameters a recipe gives the reward (`location` of a reward model is its name's PATH)."""
    return [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]


def rewards() -> dict[str, type]:
    from rewards.registry import REWARDS, reward_class

    return {name: reward_class(name) for name in (*REWARDS, MODEL_REWARD)}


def missing_docs() -> list[str]:
    """`reward: parameter` for every parameter without an `Args:` entry, `Args:` entries naming no parameter, and
    rewards without a summary."""
    found = []
    for name, cls in rewards().items():
        summary, entries = split_docstring(cls)
        names = {p.name for p in parameters(cls)}
        found += [f"{name}: {p} (no Args: entry)" for p in sorted(names - entries.keys())]
        found += [f"{name}: {p} (Args: names no parameter)" for p in sorted(entries.keys() - names)]
        if not summary:
            found.append(f"{name}: (no summary)")
    return found


def _default(parameter: inspect.Parameter) -> str:
    if parameter.default is inspect.Parameter.empty:
        return "required"
    value = parameter.default
    if hasattr(value, "__dataclass_fields__"):
        return "see description"
    if value is None:
        return "null"
    return code(value if isinstance(value, str) else repr(value))


def page() -> str:
    lines = ["# Rewards reference", "",
             "Generated from `rewards/registry.py` and each reward class's docstring when the site is built. A recipe "
             "names a reward with its parameters (`rewards: [{name: soft_overlong, weight: 1.0, params: {max_length: "
             "3000, cache: 500}}]`); an unknown parameter or a missing required one is exit 2. What the rewards "
             "score and how to write your own: [Rewards](../rewards.md).", ""]
    for name, cls in rewards().items():
        summary, entries = split_docstring(cls)
        module = cls.__module__.replace(".", "/") + ".py"
        lines += [f"## `{name}`", "", cell(summary), "", f"Defined in `{module}` (`{cls.__name__}`).", ""]
        params = [p for p in parameters(cls) if not (name == MODEL_REWARD and p.name == "location")]
        if params:
            lines += [table(["parameter", "default", "description"],
                            [[f"`{p.name}`", _default(p), entries.get(p.name, "")] for p in params]), ""]
        else:
            lines += ["No parameters.", ""]
    return "\n".join(lines)
