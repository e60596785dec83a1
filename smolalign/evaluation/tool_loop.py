"""Answers with tools, for `eval`: each answer a loop of turns, as GRPO's tool loop runs them in training. The
model's turn is generated; when it calls tools (`smolalign.tools.calls.parse_turn`) and has turns left, the calls
run and their results join the conversation as `tool` messages, and the model goes on; otherwise the answer ends
there. Each round generates every conversation still open in one pass over the generator (batched as the
evaluation's other answers), with seeds that depend only on the evaluation's seed, the mode and the round.

The conversation fed back holds the model's turn as the text it generated (not re-rendered from the parsed call),
so what the model reads next is what it wrote."""

from dataclasses import dataclass

from smolalign.evaluation.inputs import EvalInputs
from smolalign.pairs.backends import Answer, Generator
from smolalign.pairs.prompts import Prompt, prompt_key
from smolalign.progress import Progress
from smolalign.tools.calls import parse_turn, run_calls
from smolalign.tools.resolve import Tools

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


def schemas(tools: Tools) -> list[dict]:
    from transformers.utils import get_json_schema

    return [get_json_schema(function) for function in tools.functions]


def sample_with_tools(inputs: EvalInputs, generator: Generator, kwargs: dict, mode: str, label: str,
                      base_seed: int) -> list[list[ToolAnswer]]:
    """K answers with tools for every prompt."""
    tools = inputs.tools
    functions = {function.__name__: function for function in tools.functions}
    section, k = inputs.section, inputs.section.samples
    kwargs = {**kwargs, "tools": schemas(tools)}
    conversations = {(i, j): list(prompt.messages) for i, prompt in enumerate(inputs.prompts) for j in range(k)}
    answers = {key: ToolAnswer([], ids=[]) for key in conversations}
    per_call = section.batch_size if section.backend == "transformers" else len(conversations)
    open_keys = list(conversations)
    with Progress(len(conversations), f"eval: {label} {mode} (× {k} samples, ≤ {tools.max_turns} calls)",
                  "answers") as progress:
        for round_number in range(tools.max_turns + 1):
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
                if message.get("tool_calls") and turn.finished and round_number < tools.max_turns:
                    results = run_calls(message["tool_calls"], functions)
                    answer.trajectory += results
                    answer.text += "".join(f"\n<tool_response>\n{r['content']}\n</tool_response>\n" for r in results)
                    conversations[key] = [*conversations[key], {"role": "assistant", "content": turn.text}, *results]
                    still_open.append(key)
                else:
                    progress.update(1)
            open_keys = still_open
    return [[answers[(i, j)] for j in range(k)] for i in range(len(inputs.prompts))]
