"""Sampling K answers per prompt in each mode from each model (through the pair-generation backends), and scoring
every sample: rewards on the whole turn (the rewards themselves score only the answer after the think block),
compliance with the mode, whether it ended its turn, and its length in tokens."""

from dataclasses import dataclass

from rewards.errors import RewardError
from rewards.registry import check_scores, trainer_extras
from rewards.text import whole_turns
from rewards.trajectory import read_trajectory
from smolalign.errors import SmolalignError
from smolalign.evaluation.compliance import complies
from smolalign.evaluation.inputs import EvalInputs, EvalModel
from smolalign.evaluation.tool_loop import sample_with_tools
from smolalign.pairs.backends import Answer, Generator, make_generator
from smolalign.pairs.prompts import Prompt, prompt_key
from smolalign.progress import Progress
from smolalign.recipe.generation_schema import GeneratorSection
from smolalign.templates.registry import MODEL_TEMPLATE, resolve_template
from smolalign.templates.render import answer_prefill
from smolalign.tools.calls import parse_turn

MODE_SEED_STRIDE = 1_000_003


@dataclass
class ModeSamples:
    """One model's K samples per prompt in one mode; `turns` are whole assistant turns (prefill + generated text)."""

    turns: list[list[str]]
    arrays: dict
    """(prompts, K) arrays: rewards {name: floats, NaN for None}, compliant, finished, tokens."""


def generator_section(inputs: EvalInputs, model: EvalModel) -> GeneratorSection:
    section = inputs.section
    return GeneratorSection(source=model.source, backend=section.backend, base_url=section.base_url,
                            template=None if section.backend == "openai" else inputs.template_name,  # a server's own
                            temperature=section.temperature, top_p=section.top_p,
                            max_new_tokens=section.max_new_tokens, batch_size=section.batch_size)


def evaluate_models(inputs: EvalInputs) -> dict[str, dict[str, ModeSamples]]:
    """label -> mode -> samples, for every model, one model loaded at a time; consecutive labels of one source (a
    model without tools, then with them) share one load, and a vLLM engine goes on to the next model when it can
    serve it (`Generator.serve`: checkpoints of one model, as a pipeline's stages are): an engine takes longer to
    start than a short evaluation takes."""
    results, generator, loaded = {}, None, None
    try:
        for model in inputs.models:
            section = generator_section(inputs, model)
            if generator is None or (model.source != loaded and not generator.serve(section)):
                if generator is not None:
                    generator.close()
                generator = None  # not closed twice if the next load fails
                generator = make_generator("eval", section, inputs.template_name, inputs.template_kwargs)
            loaded = model.source
            results[model.label] = {mode: evaluate_mode(inputs, generator, model, mode)
                                    for mode in inputs.section.modes}
    finally:
        if generator is not None:
            generator.close()
    return results


def evaluate_mode(inputs: EvalInputs, generator: Generator, model: EvalModel, mode: str) -> ModeSamples:
    kwargs = {**inputs.template_kwargs, "enable_thinking": mode == "think"}
    prefill = answer_prefill(getattr(generator, "template", None) or _local_template(inputs), kwargs,
                             getattr(generator, "specials", None))
    if model.tools or (inputs.tools is not None and inputs.tools.environment_factory is not None):
        answers = sample_with_tools(inputs, generator, kwargs, mode, model.label, mode_seed(inputs, mode),
                                    offered=model.tools)
        return score(inputs, answers, prefill, mode, [[a.trajectory for a in group] for group in answers])
    answers = sample_all(inputs, generator, kwargs, mode, model.label)
    if inputs.tools is not None:  # read as the tool models' turns are, so a call it writes counts as one
        return score(inputs, answers, prefill, mode, [[[parse_turn(a.text)] for a in group] for group in answers])
    return score(inputs, answers, prefill, mode)


def mode_seed(inputs: EvalInputs, mode: str) -> int:
    section = inputs.section
    return section.seed * MODE_SEED_STRIDE + section.modes.index(mode) * 100_003


def sample_all(inputs: EvalInputs, generator: Generator, kwargs: dict, mode: str, label: str) -> list[list[Answer]]:
    """K answers for every prompt. transformers: calls of about batch_size sequences (a prompt's K samples stay in
    one call); vLLM and servers: one call, they batch or run requests concurrently themselves. Seeds depend only on
    the evaluation seed, the mode and the call's position, so every model sees the same seeds and reruns repeat."""
    section = inputs.section
    prompts = [Prompt(prompt_key(p.messages), p.messages, p.origin) for p in inputs.prompts]
    k = section.samples
    per_call = max(1, section.batch_size // k) if section.backend == "transformers" else len(prompts)
    base = mode_seed(inputs, mode)
    answers: list[list[Answer]] = []
    with Progress(len(prompts), f"eval: {label} {mode} (× {k} samples)", "prompts") as progress:
        for call, start in enumerate(range(0, len(prompts), per_call)):
            batch = prompts[start:start + per_call]
            answers += generator.sample(batch, base + call, k, kwargs)
            progress.update(len(batch))
    return answers


def score(inputs: EvalInputs, answers: list[list[Answer]], prefill: str, mode: str,
          trajectories: list[list[list[dict]]] | None = None) -> ModeSamples:
    """Every sample scored. With tools, `trajectories` are what the rewards read (as GRPO's rewards do: the final
    answer is the model's last turn); compliance is checked on that turn."""
    import numpy as np

    k = inputs.section.samples
    turns = [[prefill + a.text for a in group] for group in answers]
    flat = [a for group in answers for a in group]
    texts = [t for group in turns for t in group]
    raw = None if trajectories is None else [t for group in trajectories for t in group]
    completions = texts if raw is None else [whole_turns(t, prefill) for t in raw]  # what the rewards read
    read = [read_trajectory(c) for c in (completions if raw is None else raw)]
    answered = texts if trajectories is None else [prefill + r.answer for r in read]
    columns = {name: [p.columns.get(name) for p in inputs.prompts for _ in range(k)]
               for name in {c for p in inputs.prompts for c in p.columns}}
    columns["chat_template_kwargs"] = [{"enable_thinking": mode == "think"}] * len(texts)
    columns["prompts"] = [p.messages for p in inputs.prompts for _ in range(k)]
    if all(a.ids is not None for a in flat):
        columns["completion_ids"] = [a.ids for a in flat]
    if inputs.tools is not None and inputs.tools.environment_factory is not None:  # as TRL hands them to rewards
        columns["environments"] = [a.environment for a in flat]
    shape = (len(inputs.prompts), k)
    columns.update(trainer_extras())
    rewards = {}
    for section, reward in inputs.rewards:
        try:
            values = reward(completions=completions, **columns)
            check_scores(section.name, values, len(texts))
        except ValueError as exc:  # e.g. a length reward without token ids from a server: fix its parameters
            raise SmolalignError(f"reward {section.name}: {exc}" if not isinstance(exc, RewardError) else str(exc)) from None
        rewards[section.name] = np.array([np.nan if v is None else float(v) for v in values]).reshape(shape)
    arrays = {"rewards": rewards,
              "compliant": np.array([complies(t, mode) for t in answered], dtype=float).reshape(shape),
              "finished": np.array([a.finished for a in flat], dtype=float).reshape(shape),
              "tokens": np.array([a.tokens for a in flat], dtype=float).reshape(shape)}
    if inputs.tools is not None:  # every model's, so the tables compare them (a model without tools calls none)
        arrays["tool_calls"] = np.array([r.calls for r in read], dtype=float).reshape(shape)
        arrays["tool_errors"] = np.array([r.tool_errors + r.malformed_calls for r in read], dtype=float).reshape(shape)
    return ModeSamples(turns, arrays)


def _local_template(inputs: EvalInputs):
    """The evaluation's template, for a server's answers (assumed to render as it does); None for `model`."""
    return None if inputs.template_name == MODEL_TEMPLATE else resolve_template(inputs.template_name)
