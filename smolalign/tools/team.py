"""A team's tools: `path/to/file.py:function` or `module:function` (and `...:Class` for an environment), imported and
checked before any model loads, each problem an exit-2 error naming the recipe key: the file or module must import,
the name must exist and be callable, and its schema must build the way TRL builds it (transformers'
`get_json_schema`: a type hint on every parameter, a docstring with a description and an `Args:` line for each).

During a run a team function is held to the recipe's time limit: a call that takes longer returns an error to the
model (the call goes on in a daemon thread, which is all Python allows) and is counted."""

import contextlib
import functools
import importlib
import inspect
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rewards.errors import suggest
from rewards.registry import import_file
from smolalign.errors import SmolalignError
from smolalign.tools.budget import cut, cut_tail
from smolalign.tools.python_tool import ToolError


@contextlib.contextmanager
def working_directory_importable() -> Iterator[None]:
    """The working directory on sys.path while a team's module imports (as `python -m` would have it), and off it
    again afterwards: the rest of the process imports as it did."""
    here = str(Path.cwd())
    added = "" not in sys.path and here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        yield
    finally:
        if added and here in sys.path:
            sys.path.remove(here)


def load_object(spec: str, key: str) -> Any:
    """The object `spec` names: `path/to/file.py:name` (a path relative to the working directory) or
    `package.module:name` (importable from the working directory or the installed packages)."""
    location, _, name = spec.rpartition(":")
    if not location or not name:
        raise SmolalignError(f"{key}: {spec!r} must be path/to/file.py:name or module:name")
    if location.endswith(".py"):
        path = Path(location).expanduser()
        if not path.is_file():
            raise SmolalignError(f"{key}: no such file {path}")
        try:
            module = import_file(path, "smolalign_user_tool_")
        except Exception as exc:  # the team's file: any error while importing it is bad input
            raise SmolalignError(f"{key}: {path} does not import ({type(exc).__name__}: {exc})") from None
    else:
        try:
            with working_directory_importable():
                module = importlib.import_module(location)
        except Exception as exc:  # ModuleNotFoundError, or the module's own import-time failure
            raise SmolalignError(f"{key}: module {location} does not import ({type(exc).__name__}: {exc})") from None
    if not hasattr(module, name):
        public = [n for n in vars(module) if not n.startswith("_")]
        raise SmolalignError(f"{key}: {location} has no {name!r}{suggest(name, public)}")
    return getattr(module, name)


def tool_schema(function: Callable, key: str) -> dict:
    """The JSON schema TRL will show the model for `function`, or an exit-2 error saying what to fix."""
    from transformers.utils import get_json_schema

    if not callable(function):
        raise SmolalignError(f"{key}: {function!r} is not a function")
    try:
        return get_json_schema(function)
    except Exception as exc:  # DocstringParsingException, TypeHintParsingException, ValueError
        raise SmolalignError(f"{key}: the tool's schema cannot be made from it ({exc}); give every parameter a type "
                             "hint and the function a docstring with an Args: line for each") from None


class TimedTool:
    """A team function held to a wall-clock limit and its result to the length budget; counts timeouts."""

    def __init__(self, function: Callable, timeout: float, max_output_chars: int):
        self.function, self.timeout, self.max_output_chars = function, timeout, max_output_chars
        self.timeouts = 0

    def call(self, *args, **kwargs) -> Any:
        outcome: dict = {}

        def target():
            try:
                outcome["value"] = self.function(*args, **kwargs)
            except BaseException as exc:  # handed back to TRL, which reports it to the model as the tool's error
                outcome["error"] = exc

        thread = threading.Thread(target=target, daemon=True, name=f"tool-{self.function.__name__}")
        thread.start()
        thread.join(self.timeout)
        if thread.is_alive():
            self.timeouts += 1
            raise ToolError(f"the tool ran past its {self.timeout:g}-second limit")
        if "error" in outcome:  # the model is shown the exception's type too: TRL reports str(exc) alone
            error = outcome["error"]
            raise ToolError(cut_tail(f"{type(error).__name__}: {error}", self.max_output_chars)) from error
        value = outcome.get("value")
        return cut(value, self.max_output_chars) if isinstance(value, str) else value

    def wrapped(self) -> Callable:
        """The function TRL calls: the team's name, signature, hints and docstring (its schema), our limits."""

        @functools.wraps(self.function)
        def tool(*args, **kwargs):
            return self.call(*args, **kwargs)

        tool.__signature__ = inspect.signature(self.function)
        return tool


def load_function(spec: str, key: str) -> Callable:
    function = load_object(spec, key)
    if inspect.isclass(function) or not callable(function):
        raise SmolalignError(f"{key}: {spec} is not a function (an environment class goes in tools.environment)")
    if inspect.iscoroutinefunction(function):
        raise SmolalignError(f"{key}: {spec} is async; give a plain function (its time limit runs in a thread)")
    tool_schema(function, key)
    return function


def check_environment(factory: Any, key: str) -> list[str]:
    """An environment class (or factory): one instance made and its `reset` and public methods checked as TRL will
    use them. Returns the names of its tools."""
    if not callable(factory):
        raise SmolalignError(f"{key}: {factory!r} is not a class or factory")
    try:
        environment = factory()
    except Exception as exc:  # the team's code
        raise SmolalignError(f"{key}: making an environment failed ({type(exc).__name__}: {exc})") from None
    members = dict(inspect.getmembers(type(environment), predicate=inspect.isfunction))  # as TRL lists them
    if "reset" not in members:
        raise SmolalignError(f"{key}: the environment has no reset() method (TRL calls it before each answer)")
    methods = [name for name in members if not name.startswith("_") and name not in ("reset", "get_reward")]
    if not methods:
        raise SmolalignError(f"{key}: the environment has no public methods, so the model would have no tools")
    for name in methods:
        tool_schema(getattr(environment, name), f"{key}.{name}")
    return methods


def start_environment(factory: Callable, messages: list[dict], columns: dict,
                      key: str = "eval.environment") -> tuple[Any, list[dict]]:
    """A fresh environment for one answer, reset as TRL resets it in training (`reset(prompt=..., **the row's other
    columns)`), and the prompt with what reset returned appended to its last message."""
    environment = factory()
    try:
        observation = environment.reset(prompt=messages, **columns)
    except Exception as exc:  # the team's code, or a row its reset() does not take
        raise SmolalignError(f"{key}: reset() failed ({type(exc).__name__}: {exc})") from None
    if observation is None:
        return environment, list(messages)
    if not isinstance(observation, str):
        raise SmolalignError(f"{key}: reset() returned a {type(observation).__name__}; it returns None or a string "
                             "to append to the prompt")
    return environment, [*messages[:-1], {**messages[-1], "content": messages[-1]["content"] + observation}]
