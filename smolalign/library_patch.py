"""A library's attribute replaced (or added) while a block runs: the one way smolalign changes a function of torch,
transformers, TRL or vLLM. The replacement is made from the original (a closure holds it, for the calls it hands back), and the
original is put back when the block ends, whatever happened in it; nothing is kept on the functions or in the
modules. A block opened inside another wraps the outer block's replacement and puts it back."""

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def replaced(owner: Any, name: str, replacement: Callable[[Any], Any]) -> Iterator[None]:
    """`owner.name` is `replacement(original)` while the block runs, and the original again after it."""
    original = getattr(owner, name)
    setattr(owner, name, replacement(original))
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def added(owner: Any, name: str, value: Any) -> Iterator[None]:
    """`owner.name`, which the library does not define, is `value` while the block runs, and gone again after it."""
    if name in vars(owner):
        raise AttributeError(f"{owner.__name__}.{name} exists: replace it with `replaced`")
    setattr(owner, name, value)
    try:
        yield
    finally:
        delattr(owner, name)
