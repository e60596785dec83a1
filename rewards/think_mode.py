"""The think mode of a row, decided in one place: every smolalign stage, the rewards and the evaluation call
`row_mode`, and chat_templates/smollm3.jinja applies the same flag rule, step for step (tests render and score the
same rows to prove they agree).

The rule:
- A flag is `/think`, `/no_think` or `/system_override` in the first message when it is a system message. It counts
  when the characters next to it are not word characters (letters, digits, `_`) and not `/`: "Answer briefly
  /no_think." and "Answer briefly\t/no_think" carry the flag, so does "(/think)"; "/thinking", "/no_think_x",
  "a/think" and "/think/x" do not (they stay in the text as written).
  Punctuation next to a flag counts because people end sentences with one, and SmolLM3 was trained with the hub
  template, which switches on any substring.
- `/no_think` wins over `/think`; a flag wins over `enable_thinking` (the row's chat_template_kwargs, then the
  recipe's template kwargs); without either the mode is `default` ("think", the template's own default).
- Taking a flag out of the text also takes out the spaces and tabs before it, or after it when nothing but
  whitespace precedes it on its line: "Answer briefly /no_think." becomes "Answer briefly.".

Plain Python with no imports beyond the standard library: `rewards` is usable without smolalign.
"""

from typing import Any

MODE_FLAGS = ("no_think", "think")
"""Flag words that choose the mode, in order of precedence."""
ALL_FLAGS = ("no_think", "think", "system_override")


def _word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def scan_flags(text: str, words: tuple[str, ...] = ALL_FLAGS) -> tuple[set[str], str]:
    """(the flag words `text` carries, the text with them taken out), by the rule in the module docstring.

    Examples:
        >>> scan_flags("Answer briefly /no_think.")
        ({'no_think'}, 'Answer briefly.')
        >>> scan_flags("Explain /thinking, then /think")
        ({'think'}, 'Explain /thinking, then')
    """
    # The same steps as the `flag_scan` macro of chat_templates/smollm3.jinja: split on "/", and look at what
    # follows each slash and at the character before it.
    parts = text.split("/")
    found: set[str] = set()
    out = parts[0]
    for index, part in enumerate(parts[1:], start=1):
        before = parts[index - 1]
        before_ok = (not before and index == 1) or (bool(before) and not _word_char(before[-1]))
        word = next((w for w in ALL_FLAGS if part.startswith(w)), "")
        rest = part[len(word):]
        after_ok = (not rest and index == len(parts) - 1) or (bool(rest) and not _word_char(rest[0]))
        if word and before_ok and after_ok:
            found.add(word)
            if word in words:
                out = out.rstrip(" \t")
                if not out or out.endswith("\n"):
                    rest = rest.lstrip(" \t")
                out += rest
                continue
        out += "/" + part
    return found, out


def system_text(messages: Any) -> str | None:
    """The text of the first message when it is a system message (list contents: their text parts), else None."""
    if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
        return None
    if messages[0].get("role") != "system":
        return None
    content = messages[0].get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""


def flag_mode(messages: Any) -> str | None:
    """"think" or "no_think" when the first system message carries a mode flag, else None."""
    text = system_text(messages)
    if text is None or "/" not in text:
        return None
    flags, _ = scan_flags(text, MODE_FLAGS)
    return next((w for w in MODE_FLAGS if w in flags), None)


def row_mode(messages: Any, template_kwargs: Any = None, default: str = "think") -> str:
    """"think" or "no_think" for a row: a system flag, then `template_kwargs["enable_thinking"]`, then `default`.

    Examples:
        >>> row_mode([{"role": "system", "content": "Answer briefly\\t/no_think"}], {"enable_thinking": True})
        'no_think'
        >>> row_mode("What is 2 + 2?", {"enable_thinking": False})
        'no_think'
        >>> row_mode([{"role": "user", "content": "hi"}])
        'think'
    """
    mode = flag_mode(messages)
    if mode is not None:
        return mode
    if isinstance(template_kwargs, dict) and template_kwargs.get("enable_thinking") is not None:
        return "think" if template_kwargs["enable_thinking"] else "no_think"
    return default


def without_mode_flags(messages: list[dict]) -> tuple[list[dict], bool]:
    """The messages with /think and /no_think taken out of the first system message (dropped when nothing else is
    left in it), and whether there was one."""
    text = system_text(messages)
    if text is None or "/" not in text:
        return messages, False
    flags, rest = scan_flags(text, MODE_FLAGS)
    if not flags & set(MODE_FLAGS):
        return messages, False
    rest = rest.rstrip()
    return ([{**messages[0], "content": rest}, *messages[1:]] if rest.strip() else list(messages[1:])), True


def with_mode_flag(messages: list[dict], mode: str, instructions: str | None = None) -> list[dict]:
    """The messages with the flag for `mode` in the first system message; a mode flag already there is replaced.

    Without a system message, one is added holding `instructions` (the template's `custom_instructions` kwarg) and
    the flag: a system message replaces the kwarg in the template, so a bare flag would swap the instructions the
    other rows render with for the template's default persona."""
    flag = "/think" if mode == "think" else "/no_think"
    messages, _ = without_mode_flags(messages)
    text = system_text(messages)
    if text is None:
        content = f"{instructions.rstrip()} {flag}" if instructions and instructions.strip() else flag
        return [{"role": "system", "content": content}, *messages]
    return [{**messages[0], "content": f"{text.rstrip()} {flag}" if text.strip() else flag}, *messages[1:]]
