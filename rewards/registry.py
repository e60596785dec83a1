"""Rewards by name: the built-in ones, or `path/to/file.py:function` for a team's own. A recipe lists them with
parameters and weights; `resolve_reward` builds the callable and checks its parameters before any model loads."""

import importlib.util
import inspect
import numbers
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rewards.errors import RewardError, suggest
from rewards.reward_model import is_reward_model
from rewards.upstream import reward_hint


def _code(**params):
    from rewards.code import CodeReward
    from rewards.sandbox import SandboxUnavailable

    try:
        return CodeReward(**params)
    except SandboxUnavailable as exc:
        raise ValueError(f"{exc}; install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) or util-linux's "
                         "unshare") from None


def _builtin() -> dict[str, Callable[..., Any]]:
    from rewards.format import AnswerFormat, TagCount, ThinkFormat
    from rewards.judge import Judge
    from rewards.length import CosineScaled, Repetition, SoftOverlong
    from rewards.math import MathAccuracy
    from rewards.reasoning_gym import ReasoningGym
    from rewards.tool_use import ToolFormat

    return {"math_accuracy": MathAccuracy, "think_format": ThinkFormat, "tag_count": TagCount,
            "soft_overlong": SoftOverlong, "cosine_length": CosineScaled, "repetition": Repetition, "code": _code,
            "answer_format": AnswerFormat, "judge": Judge, "reasoning_gym": ReasoningGym,
            "tool_format": ToolFormat}


REWARDS = ("math_accuracy", "think_format", "tag_count", "soft_overlong", "cosine_length", "repetition", "code",
           "answer_format", "judge", "reasoning_gym", "tool_format")


def reward_class(name: str) -> type:
    """The class of a built-in reward (or of `model:PATH`): its `__init__` takes the reward's parameters and its
    docstring's `Args:` documents them (the reference page is written from both)."""
    if is_reward_model(name):
        from rewards.reward_model import RewardModel

        return RewardModel
    if name == "code":  # its factory turns a missing sandbox into a parameter error; the class takes the parameters
        from rewards.code import CodeReward

        return CodeReward
    return _builtin()[name]


def resolve_reward(name: str, params: dict | None = None) -> Callable:
    """The reward callable for `name` with `params`; every problem is a RewardError naming the reward."""
    params = params or {}
    if is_user_reward(name):
        return _from_file(name, params)
    if is_reward_model(name):
        return _reward_model(name, params)
    factories = _builtin()
    if name not in factories:
        if reward_hint(name):
            raise RewardError(f"reward {reward_hint(name)}")
        raise RewardError(f"unknown reward {name!r}{suggest(name, REWARDS)}; built in: {', '.join(REWARDS)}, "
                          "model:PATH (a reward model) or path/to/file.py:function")
    _check_params(name, reward_class(name).__init__, params)
    try:
        return factories[name](**params)
    except (TypeError, ValueError) as exc:
        raise RewardError(f"reward {name}: {exc}") from None


def _reward_model(name: str, params: dict) -> Callable:
    from rewards.reward_model import PREFIX, RewardModel

    _check_params(name, reward_class(name).__init__, {"location": name[len(PREFIX):], **params})
    try:
        return RewardModel(name[len(PREFIX):], **params)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, RewardError):
            raise
        raise RewardError(f"reward {name}: {exc}") from None


def _check_params(name: str, function: Callable, params: dict) -> None:
    signature = inspect.signature(function)
    known = [p for p in signature.parameters if p != "self"]
    for key in params:
        if key not in known:
            raise RewardError(f"reward {name}: unknown parameter {key!r}{suggest(key, known)} "
                                 f"(parameters: {', '.join(known) or 'none'})")
    missing = [p.name for p in signature.parameters.values()
               if p.name != "self" and p.default is inspect.Parameter.empty
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in params]
    if missing:
        raise RewardError(f"reward {name}: parameter {missing[0]!r} is required")
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # an annotation that does not resolve: its values are the reward's own to check
        hints = {}
    for key, value in params.items():
        expected = _simple_types(hints.get(key))
        # bool is an int to Python, not to a recipe; an int is a fine float
        if expected and not (isinstance(value, expected) and not (isinstance(value, bool) and bool not in expected)):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in expected)
            raise RewardError(f"reward {name}: parameter {key!r} must be {names}, got {value!r:.60}")


def _simple_types(annotation) -> tuple[type, ...] | None:
    """The types a parameter annotated int, float, str or bool (or one of them | None) accepts; None for any other
    annotation (a list, a mapping, a class), which is left to the reward."""
    members = typing.get_args(annotation) if isinstance(annotation, types.UnionType) or \
        typing.get_origin(annotation) is typing.Union else (annotation,)
    if not members or not all(m in (int, float, str, bool, type(None)) for m in members):
        return None
    accepted = set(members) | ({int} if float in members else set())
    return tuple(accepted)


def import_file(path: Path, prefix: str):
    """A team's .py file imported as the module `{prefix}{stem}` (rewards, tools); the file's own errors propagate,
    for the caller to name the recipe key."""
    module_spec = importlib.util.spec_from_file_location(f"{prefix}{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def _from_file(spec: str, params: dict) -> Callable:
    """`file.py:function`: the function itself is the reward; with params, it is a factory called with them."""
    path_text, attribute = spec.rsplit(":", 1)
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise RewardError(f"reward {spec}: no such file {path}")
    try:
        module = import_file(path, "smolalign_user_reward_")
    except Exception as exc:  # the user's file: any error while importing it is bad input
        raise RewardError(f"reward {spec}: the file does not import ({type(exc).__name__}: {exc})") from None
    function = getattr(module, attribute, None)
    if function is None or not callable(function):
        raise RewardError(f"reward {spec}: {path.name} has no function {attribute!r}")
    if params:
        _check_params(spec, function, params)
        function = function(**params)
    if not getattr(function, "__name__", None):
        function.__name__ = attribute
    return function


def required_columns(reward: Callable) -> tuple[str, ...]:
    """Dataset columns a reward reads (declared by built-ins as `required_columns`)."""
    return tuple(getattr(reward, "required_columns", ()) or ())


def check_reward_columns(named_rewards: list[tuple[str, Callable]], columns: list[str]) -> None:
    """Every column each (name, reward) reads is among the data's `columns`; else a RewardError naming both."""
    for name, reward in named_rewards:
        for column in required_columns(reward):
            if column not in columns:
                raise RewardError(f"reward {name} reads the column {column!r}, which the data does not have "
                                     f"(columns: {', '.join(columns)}; rename yours with columns:)")


TRAINER_ARGUMENTS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")
"""What GRPOTrainer (TRL 1.16) passes every reward function by keyword, besides one list per dataset column."""


def is_user_reward(name: str) -> bool:
    return ":" in name and name.split(":", 1)[0].endswith(".py")


def check_reward_signature(name: str, reward: Callable, columns: list[str]) -> None:
    """A team's reward accepts what the trainer will pass it (every column but `prompt`, and `TRAINER_ARGUMENTS`),
    and needs nothing else; else a RewardError naming the function and the keyword."""
    try:
        parameters = inspect.signature(reward).parameters.values()
    except (TypeError, ValueError):
        return  # a callable whose signature Python cannot read: its first call is the check
    passed = [*TRAINER_ARGUMENTS, *(c for c in columns if c != "prompt")]
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    for p in parameters:
        if p.default is p.empty and (p.kind == p.POSITIONAL_ONLY or (p.name in named and p.name not in passed)):
            raise RewardError(f"reward {name}: parameter {p.name!r} is neither a column of the data nor one the "
                              f"trainer passes ({', '.join(passed)}); give it a default or rename it")
    if not any(p.kind == p.VAR_KEYWORD for p in parameters):
        refused = [k for k in passed if k not in named]
        if refused:
            raise RewardError(f"reward {name}: the trainer passes {', '.join(refused)} by keyword, which it does not "
                              "accept; add **kwargs to its parameters")


def trainer_extras() -> dict:
    """The keywords GRPOTrainer passes every reward besides the columns and completions, as a caller outside
    training (eval, `rewards test`, graded pairs) passes them, so that one signature check holds for every caller."""
    return {"trainer_state": None, "log_extra": lambda *a, **k: None, "log_metric": lambda *a, **k: None}


def check_team_reward(name: str, reward: Callable, columns: list[str], row: dict, *,
                      text_completions: bool = False) -> None:
    """What every caller of a team's reward (training, eval, graded pairs, `rewards test`) checks before using it:
    its signature against the keywords it will get (`columns` of the data, TRL's own), and one call on the data's
    first `row` returning one number per completion. Built-in rewards are left alone. RewardError names the function.
    `text_completions`: the caller passes answers as text even for conversational prompts (eval, graded pairs)."""
    if is_user_reward(name):
        check_reward_signature(name, reward, columns)
        check_reward_call(name, reward, row, text_completions=text_completions)


def check_reward_call(name: str, reward: Callable, row: dict, *, text_completions: bool = False) -> None:
    """Call the reward once on the data's first row with an empty answer (a model can produce one) and check it
    returns one number (or None) per completion; else a RewardError naming the function. The answer is a message
    list for a conversational prompt, as GRPOTrainer passes it, unless `text_completions`."""
    prompt = row.get("prompt")
    conversational = isinstance(prompt, list) and not text_completions
    completion = [{"role": "assistant", "content": ""}] if conversational else ""
    columns = {k: [v] for k, v in row.items() if k not in ("prompt", "completion", "completion_ids")}
    try:
        scores = reward(prompts=[prompt], completions=[completion], completion_ids=[[]], **trainer_extras(),
                        **columns)
    except Exception as exc:  # the team's own code: any failure on a real row is refused before training
        raise RewardError(f"reward {name}: failed on the data's first row with an empty answer "
                          f"({describe_exception(exc)})") from None
    check_scores(name, scores, 1)


def check_scores(name: str, scores, count: int) -> None:
    """`scores` is a list of `count` numbers (or None); else a RewardError naming the reward."""
    if not isinstance(scores, list | tuple) or len(scores) != count:
        raise RewardError(f"reward {name}: must return a list with one score per completion, got "
                          f"{type(scores).__name__}{'' if not isinstance(scores, list | tuple) else f' of {len(scores)}'}")
    for score in scores:
        if score is not None and (isinstance(score, bool) or not isinstance(score, numbers.Real)):
            raise RewardError(f"reward {name}: must return numbers (or None), got {type(score).__name__} "
                              f"{score!r:.40}")


def describe_exception(exc: BaseException) -> str:
    """`Type: first line of the message`, for a one-line error about a team's code."""
    detail = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}{': ' + detail if detail else ''}"
