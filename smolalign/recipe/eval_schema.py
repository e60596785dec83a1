"""The `eval:` section of a recipe and the settings of `smolalign eval`: what to generate from, how, and how to score."""

from dataclasses import dataclass, field
from typing import Any, Literal

from smolalign.recipe.data_schema import SourceSection

EVAL_MODES = ("think", "no_think")
DEFAULT_MAX_TURNS = 4
"""Tool calls per answer at most, for an evaluation (and a GRPO recipe's tools:) that does not say."""


@dataclass(frozen=True)
class EvalRewardSection:
    """One reward an evaluation scores with: a built-in name or `path/to/file.py:function`, and its parameters."""

    name: str
    """A built-in reward, `model:PATH` (a reward model) or `path/to/file.py:function`."""
    params: dict[str, Any] = field(default_factory=dict)
    """The reward's parameters (see the rewards reference)."""
    threshold: float = 1.0
    """A sample counts as solved (avg@K, pass@K) when its reward is at least this: 1.0 for a 0/1 reward."""


_TOP_P = 0.95
"""SmolLM3's recommended nucleus: the default top_p of an evaluation."""


@dataclass(frozen=True)
class EvalSection:
    """`smolalign eval` settings, and the `eval:` section a stage runs on its output when it ends."""

    data: list[SourceSection]
    """Prompts (`prompt`: a string or messages, or `messages`) and the columns the rewards read (e.g. solution)."""
    rewards: list[EvalRewardSection]
    """The rewards each answer is scored with (at least one)."""
    modes: list[str] = field(default_factory=lambda: list(EVAL_MODES))
    """Reasoning modes to generate in: think, no_think (the template's enable_thinking)."""
    samples: int = 1
    """K: answers per prompt and mode (avg@K, pass@K)."""
    max_new_tokens: int = 256
    """Generation budget per answer, in tokens (answers cut off there count in `truncation`)."""
    temperature: float = 0.6
    """SmolLM3's recommended sampling (0.6, top_p 0.95); 0 is greedy (then K > 1 repeats the same answer)."""
    top_p: float = _TOP_P
    """Nucleus sampling: the smallest set of tokens whose probability reaches top_p is sampled from."""
    backend: Literal["transformers", "vllm", "openai"] = "transformers"
    """transformers (batched generate), vllm (in-process engine; on a CPU its CPU build) or openai (a running
    OpenAI-compatible server at `base_url`)."""
    base_url: str | None = None
    """openai backend: the server's API root (http://127.0.0.1:8000/v1); the models are its served names."""
    batch_size: int = 16
    """Sequences per generate call (transformers, vllm) or requests in flight (openai)."""
    template: str | None = None
    """Chat template the prompts are rendered with; default: the recipe's (smollm3 for `smolalign eval`)."""
    max_prompts: int | None = None
    """Use only the first N prompts."""
    seed: int = 0
    """Seeds the sampling and the bootstrap: a rerun gives the same numbers."""
    before: bool = True
    """In a recipe: also evaluate the stage's input model, as the baseline of the before/after table."""
    tools: list[str] = field(default_factory=list)
    """Tools the models may call (python, path/to/file.py:function, module:function): each model is evaluated twice,
    as LABEL without tools and LABEL+tools with them, and LABEL+tools compared with LABEL (paired). Adds the
    tool-call rate (answers with a call) and tool errors per answer to the tables."""
    max_turns: int | None = None
    """With tools: tool calls (rounds) per answer at most (4 when unset); an answer still calling a tool then ends
    there. Without tools or an environment it is refused: nothing would read it."""
    environment: str | None = None
    """A stateful environment (path/to/file.py:Class, module:Class), as a GRPO recipe's tools.environment: one
    instance per answer, reset with the prompt's row; its public methods are LABEL+tools' tools, LABEL answers the same
    reset task with none. Its get_reward(), when it has one, is scored as a reward named after the class."""

    def __post_init__(self) -> None:
        if not self.data:
            raise ValueError("data must list at least one dataset")
        if not self.rewards:
            raise ValueError("rewards must list at least one reward, e.g. [{name: math_accuracy}]")
        if not self.modes:
            raise ValueError("modes must list at least one of think, no_think")
        for mode in self.modes:
            if mode not in EVAL_MODES:
                raise ValueError(f"unknown mode {mode!r}; the modes are think and no_think")
        if len(set(self.modes)) != len(self.modes):
            raise ValueError(f"modes lists a mode twice: {', '.join(self.modes)}")
        if self.samples < 1:
            raise ValueError(f"samples (K) must be at least 1, got {self.samples}")
        if self.max_new_tokens < 1 or self.batch_size < 1:
            raise ValueError("max_new_tokens and batch_size must be at least 1")
        if self.max_prompts is not None and self.max_prompts < 1:
            raise ValueError(f"max_prompts must be at least 1, got {self.max_prompts}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError("temperature must be >= 0 and top_p in (0, 1]")
        if self.temperature == 0 and self.samples > 1:
            raise ValueError(f"samples {self.samples} with temperature 0 (greedy) is one answer repeated, so pass@K "
                             "would equal avg@1; sample with a temperature > 0 (SmolLM3: 0.6), or samples: 1")
        if self.temperature == 0 and self.top_p not in (_TOP_P, 1.0):  # 1.0: the whole distribution, as greedy
            raise ValueError(f"top_p {self.top_p} is not used with temperature 0 (greedy); drop it, or sample")
        if self.backend not in ("transformers", "vllm", "openai"):
            raise ValueError(f"unknown backend {self.backend!r}; one of transformers, vllm, openai")
        if (self.tools or self.environment) and self.backend == "openai":
            raise ValueError("tools run in smolalign's own generation loop: use backend transformers or vllm")
        if self.max_turns is not None and not (self.tools or self.environment):
            raise ValueError("max_turns limits the tool calls of the models evaluated with tools; without tools or "
                             "environment nothing reads it: add them, or drop max_turns")
        if self.max_turns is None and (self.tools or self.environment):
            object.__setattr__(self, "max_turns", DEFAULT_MAX_TURNS)  # frozen; filled so the resolved recipe shows it
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {self.max_turns}")
        if self.backend == "openai" and not self.base_url:
            raise ValueError("backend openai needs base_url (e.g. http://127.0.0.1:8000/v1)")
        if self.base_url and self.backend != "openai":
            raise ValueError(f"base_url is read by backend openai only (a running server); with backend "
                             f"{self.backend} the models are loaded here: add backend openai, or drop base_url")
