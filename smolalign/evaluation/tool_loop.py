"""Answers with tools, for `eval`: each answer a loop of turns, as GRPO's tool loop runs them in training. The
model's turn is generated; when it calls tools (`smolalign.tools.calls.parse_turn`) and has turns left, the calls
run and their results join the conversation as `tool` messages, and the model goes on; otherwise the answer ends
there. Each round generates every conversation still open in one pass over the generator (batched as the
evaluation's other answers), with seeds that depend only on the evaluation's seed, the mode and the round.

The conversation fed back holds the model's turn as the text it generated (not re-rendered from the parsed call),
so what the model reads next is what it wrote.

With an environment (`eval --environment`), as TRL's environment_factory runs in training: one instance per answer,
`reset(prompt=..., **the row's other columns)` before its first turn (a string it returns is appended to the last
user message), its public methods the answer's tools. The same model without tools answers the same task: its own
instances are made and reset, and it is shown no tools."""

from dataclasses import dataclass
from typing import Any

from smolalign.evaluation.inputs import EvalInputs
from smolalign.pairs.backends import Answer, Generator
from smolalign.pairs.prompts import Prompt, prompt_key
from smolalign.progress import Progress
from smolalign.tools.calls import parse_turn, run_calls
from smolalign.tools.resolve import Tools
from smolalign.tools.team import start_environment

ROUND_SEED_STRIDE = 7_919


@dataclass
class ToolAnswer:
    """One answer with tools: its trajectory (the model's turns, parsed, and the tools' results), the whole answer as
    one text (each turn as generated, each result in <tool_response> tags: the samples file), and its totals (every
    turn's tokens; finished when its last turn ended)."""

    trajectory: list[dict]
    text: str = ""
    finished: bool = False
    tokens: int = 0
    ids: list[int] | None = None
    """The model's generated tokens, every turn's in order (None when the backend reports only counts)."""
    environment: Any = None
    """The answer's environment instance, in the state the answer left it (None without an environment)."""


def answer_tools(tools: Tools, environment: Any) -> list:
    """The functions an answer may call: the standalone tools, then its environment's methods (TRL's order)."""
    return [*tools.functions, *(getattr(environment, name) for name in tools.methods if environment is not None)]


def sample_with_tools(inputs: EvalInputs, generator: Generator, kwargs: dict, mode: str, label: str,
                      base_seed: int, offered: bool = True) -> list[list[ToolAnswer]]:
    """K answers with tools for every prompt; with `offered` false, the same task with no tools shown (the model
    answers in one turn; an environment is still made and reset for each answer)."""
    from transformers.utils import get_json_schema

    tools = inputs.tools
    section, k = inputs.section, inputs.section.samples
    conversations, answers = {}, {}
    for i, prompt in enumerate(inputs.prompts):
        for j in range(k):
            environment, messages = None, list(prompt.messages)
            if tools.environment_factory is not None:
                environment, messages = start_environment(tools.environment_factory, messages, prompt.columns)
            conversations[(i, j)], answers[(i, j)] = messages, ToolAnswer([], ids=[], environment=environment)
    functions = {key: {f.__name__: f for f in answer_tools(tools, answers[key].environment)} for key in answers}
    if offered:
        first = next(iter(answers.values())).environment
        kwargs = {**kwargs, "tools": [get_json_schema(f) for f in answer_tools(tools, first)]}
    calls = tools.max_turns if offered else 0
    per_call = section.batch_size if section.backend == "transformers" else len(conversations)
    open_keys = list(conversations)
    shown = f"≤ {calls} calls" if offered else "no tools"
    with Progress(len(conversations), f"eval: {label} {mode} (× {k} samples, {shown})", "answers") as progress:
        for round_number in range(calls + 1):
            if not open_keys:
                break
            generated: list[Answer] = []
            for call, start in enumerate(range(0, len(open_keys), per_call)):
                batch = [Prompt(prompt_key(conversations[key]), conversations[key], inputs.prompts[key[0]].origin)
                         for key in open_keys[start:start + per_call]]
                generated += generator.generate(batch, base_seed + round_number * ROUND_SEED_STRIDE + call, kwargs)
            still_open = []
            for key, turn in zip(open_keys, generated, strict=True):
                answer, message = answers[key], parse_turn(turn.text)
                answer.trajectory.append(message)
                answer.text += turn.text
                answer.tokens += turn.tokens
                answer.ids = None if answer.ids is None or turn.ids is None else answer.ids + turn.ids
                answer.finished = turn.finished
                if message.get("tool_calls") and turn.finished and round_number < calls:
                    results = run_calls(message["tool_calls"], functions[key])
                    answer.trajectory += results
                    answer.text += "".join(f"\n<tool_response>\n{r['content']}\n</tool_response>\n" for r in results)
                    conversations[key] = [*conversations[key], {"role": "assistant", "content": turn.text}, *results]
                    still_open.append(key)
                else:
                    progress.update(1)
            open_keys = still_open
    return [[answers[(i, j)] for j in range(k)] for i in range(len(inputs.prompts))]
