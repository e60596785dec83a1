"""A recipe's `tools:` turned into what GRPOTrainer takes (`tools=`, `environment_factory=`), every tool loaded and
checked first; and the time-outs a run logs, and the sandbox it closes at its end."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rewards.sandbox import SandboxUnavailable, choose_level
from smolalign.errors import SmolalignError
from smolalign.recipe.schema import ToolsSection
from smolalign.tools.python_tool import PythonTool
from smolalign.tools.team import TimedTool, check_environment, load_function, load_object


@dataclass
class Tools:
    functions: list[Callable]
    """What GRPOTrainer's `tools=` takes."""
    environment_factory: Callable | None
    max_turns: int
    held: list[Any] = field(default_factory=list)
    """The PythonTool and TimedTools, for their time-out counts and `close()`."""
    methods: tuple[str, ...] = ()
    """The environment's methods the model is shown as tools (its public ones but reset and get_reward)."""

    @property
    def names(self) -> tuple[str, ...]:
        """Every tool the model is shown: the functions, then the environment's methods."""
        return (*(function.__name__ for function in self.functions), *self.methods)

    @property
    def timeouts(self) -> int:
        return sum(tool.timeouts for tool in self.held)

    def close(self) -> None:
        for tool in self.held:
            if hasattr(tool, "close"):
                tool.close()


def resolve_tools(section: ToolsSection, *, sandbox_level: str = "auto") -> Tools:
    """Load and check every tool of `section` (exit 2 naming the key), before any model loads."""
    functions, names, held = [], [], []
    for index, spec in enumerate(section.use):
        key = f"tools.use.{index} ({spec})"
        if spec == "python":
            try:
                level = choose_level(sandbox_level)
            except SandboxUnavailable as exc:
                raise SmolalignError(f"{key}: {exc}; install bubblewrap (apt-get install bubblewrap) or util-linux's "
                                     "unshare") from None
            tool = PythonTool(section.timeout, section.max_output_chars, level)
            functions.append(tool.function())
        else:
            tool = TimedTool(load_function(spec, key), section.timeout, section.max_output_chars)
            functions.append(tool.wrapped())
        held.append(tool)
        names.append(functions[-1].__name__)
    duplicate = {n for n in names if names.count(n) > 1}
    if duplicate:
        raise SmolalignError(f"tools.use: two tools are named {sorted(duplicate)[0]!r}; the model could not tell them "
                             "apart")
    factory, methods = None, []
    if section.environment is not None:
        key = f"tools.environment ({section.environment})"
        factory = load_object(section.environment, key)
        methods = check_environment(factory, key)
        clash = set(methods) & set(names)
        if clash:
            raise SmolalignError(f"{key}: its method {sorted(clash)[0]!r} has the name of a tool in tools.use")
    return Tools(functions, factory, section.max_turns, held, tuple(methods))
