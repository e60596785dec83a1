"""Which chat template a recipe means: a shipped name (`smollm3`, `chatml`), a .jinja file, or the tokenizer's own."""

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from smolalign.assets import asset_dir
from smolalign.errors import SmolalignError
from smolalign.recipe.typecheck import suggest

_GENERATION = re.compile(r"\{%-?\s*generation\s*-?%\}")
MODE_KWARG = "enable_thinking"
"""Read by smolalign as well as by hybrid templates: a row's think mode (flags, the format rewards)."""
MODEL_TEMPLATE = "model"
"""Template name meaning: keep the chat template the tokenizer ships with."""


@dataclass(frozen=True)
class ChatTemplate:
    name: str
    text: str
    origin: str
    """The file it was read from, or "tokenizer"."""

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def has_generation_markers(self) -> bool:
        return bool(_GENERATION.search(self.text))

    @property
    def is_hybrid(self) -> bool:
        """Whether it switches between think and no_think modes (and so can be checked for the mode it rendered)."""
        return MODE_KWARG in self.text

    @property
    def reads_mode_flags(self) -> bool:
        """Whether a /think or /no_think flag in the system message switches its mode (so a row can carry one)."""
        return self.is_hybrid and "/no_think" in self.text


def refuse_unread_kwargs(template: ChatTemplate, kwargs, where: str = "template.kwargs") -> None:
    """Template kwargs the template never reads are refused, with the nearest name it reads: Jinja renders an unknown
    name as unset, so a typo (`enable_thinkng: false`) trained in the other mode without a word."""
    from transformers.utils.chat_template_utils import _get_template_variables  # its own parse of the template

    read = _get_template_variables(template.text)
    for key in kwargs:
        if key != MODE_KWARG and key not in read:
            raise SmolalignError(f"{where}.{key}: template {template.name} never reads {key}"
                                 f"{suggest(str(key), sorted(read))}; it reads "
                                 f"{', '.join(sorted(read - {'messages', 'tools', 'add_generation_prompt'})) or 'none'}")


def _compiled(template: ChatTemplate) -> ChatTemplate:
    """The template, once transformers compiled it; a Jinja syntax error is refused naming its file and line,
    before any row is rendered."""
    from jinja2 import TemplateSyntaxError
    from transformers.utils.chat_template_utils import _compile_jinja_template

    try:
        _compile_jinja_template(template.text)
    except TemplateSyntaxError as exc:
        raise SmolalignError(f"template {template.origin} line {exc.lineno}: Jinja syntax error ({exc.message})") from None
    return template


def shipped_templates() -> dict[str, Path]:
    root = asset_dir("chat_templates")
    return {p.stem: p for p in sorted(root.glob("*.jinja"))} if root.is_dir() else {}


def resolve_template(name: str, tokenizer_template: str | None = None) -> ChatTemplate:
    """A shipped name, a path to a .jinja file, or `model` for `tokenizer_template` (None: not loaded yet)."""
    if name == MODEL_TEMPLATE:
        if tokenizer_template is None:
            raise SmolalignError("template.name is `model` but the model's tokenizer has no chat template")
        return _compiled(ChatTemplate(MODEL_TEMPLATE, tokenizer_template, "tokenizer"))
    shipped = shipped_templates()
    if name in shipped:
        return _compiled(ChatTemplate(name, shipped[name].read_text(), str(shipped[name])))
    path = Path(name).expanduser()
    if path.is_file():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise SmolalignError(f"template {path}: not a UTF-8 text file") from None
        return _compiled(ChatTemplate(path.stem, text, str(path.resolve())))
    if path.suffix in (".jinja", ".j2") or "/" in name:
        raise SmolalignError(f"template {name}: no such file")
    choices = [*shipped, MODEL_TEMPLATE]
    raise SmolalignError(f"unknown template {name!r}{suggest(name, choices)}; shipped: {', '.join(choices)}")
