"""Where the shipped recipes and chat templates live: the repository checkout, or inside an installed wheel."""

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def asset_dir(name: str) -> Path:
    """`recipes` or `chat_templates`: the checkout's top-level folder if present, else the wheel's copy."""
    checkout = _PACKAGE.parent / name
    if checkout.is_dir():
        return checkout
    return _PACKAGE / "_assets" / name
