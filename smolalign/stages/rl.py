"""`smolalign rl`: GRPO on TRL's GRPOTrainer with smolalign's verifiable rewards.

smolalign reads the prompts through the data mixture (smolalign.data.prompts, which carries each row's think mode
into its prompt), checks the columns every reward reads before any model loads, maps the rewards and weights onto
TRL, and picks the generation backend: transformers `generate`, vLLM colocated in the training process, or a vLLM
server (one that runs, or one it starts, health-checks and stops).
A watchdog fails the run when no step finishes within `generation.stall_timeout`, instead of hanging.
"""

import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from rewards.registry import check_reward_columns, check_team_reward
from rewards.text import WithPrefill
from rewards.think_mode import row_mode
from smolalign.data.check import check_prompt_rows, check_reward_rows
from smolalign.data.prompts import read_prompt_rows, recipe_prompts
from smolalign.data.rows import unknown_tool_problem
from smolalign.errors import SmolalignError
from smolalign.generation.backend_settings import ServerAddress, describe_generation, vllm_fields
from smolalign.hardware import Hardware
from smolalign.models.load import load_model, load_tokenizer, preflight_tokenizer
from smolalign.plan import make_plan
from smolalign.resolve import Run
from smolalign.runs.metrics import metrics_callback
from smolalign.runs.save_on_signal import settings_generation_cycle
from smolalign.stages.generating import generating
from smolalign.stages.lifecycle import Checked, OpenRun, Stage, start_run
from smolalign.stages.low_precision_updates import check_continuous_batching
from smolalign.stages.tool_grpo import tool_grpo_trainer
from smolalign.stages.trainer_config import check_config, peft_config, trl_config
from smolalign.templates.registry import MODEL_TEMPLATE, resolve_template
from smolalign.templates.render import opened_think
from smolalign.tools.python_tool import PythonTool
from smolalign.tools.rendering import install_response_parser
from smolalign.tools.resolve import Tools, resolve_tools


def check_batch(run: Run) -> None:
    """What GRPOConfig would refuse: generation batches that split prompt groups (groups of one are refused with the
    other ranges, `recipe.train_section.RANGES`)."""
    settings = run.settings
    generations = settings["num_generations"]
    _, batch = settings.generation_batches()
    if batch % generations:
        explicit = settings.is_set("generation_batch_size") or settings.is_set("steps_per_generation")
        where = (f"generation batch {batch}" if explicit else
                 f"generation batch (per-device {settings.per_device_batch} × accumulation × {settings.world_size} "
                 f"processes = {batch}); change one of them or set train.generation_batch_size")
        raise SmolalignError(f"train.num_generations {generations} must divide the {where}")
    cycle = settings_generation_cycle(settings)
    saves = settings.get("save_steps") if str(settings.get("save_strategy")).endswith("steps") else None
    if cycle > 1 and saves and saves >= 1 and saves % cycle:  # below 1: a share of the run, TRL's ratio form
        problem = (f"train.save_steps {saves:g} is not a multiple of the {cycle}-step generation cycle "
                   "(steps_per_generation × num_iterations micro-batches, over accumulation): TRL keeps a cycle's "
                   "samples in memory only, so a run resumed from a checkpoint inside one trains on other samples; "
                   f"set train.save_steps to a multiple of {cycle}")
        if settings.is_set("save_steps"):
            raise SmolalignError(problem)
        print(f"warning: {problem} (the {saves:g} is TRL's default)", file=sys.stderr)


@dataclass(frozen=True)
class PromptsChecked(Checked):
    """What the checks of a stage whose policy generates built: its prompts and rewards, and GRPO's tools."""

    prompts: object
    """The prompts (`data.prompts.recipe_prompts`: train and held-out)."""
    rewards: list
    """The rewards (the run's, built once when it was resolved)."""
    tools: Tools | None = None


def check_before_loading(run: Run) -> PromptsChecked:
    recipe = run.recipe
    run.source()
    template = None if recipe.template.name == MODEL_TEMPLATE else resolve_template(recipe.template.name)
    check_batch(run)
    check_continuous_batching(run)
    check_config(run, grpo_config, None)
    prompts, rewards, checked = check_prompts_and_rewards(run)
    tools = check_tools(run, prompts) if recipe.tools is not None else None
    plan = make_plan(run, template, len(prompts.train), data_format="prompt")
    add_rl_rows(plan, run)
    if tools is not None:
        add_tools_row(plan, run, tools)
    add_sandbox_row(plan, rewards)
    plan.add_data_check(checked)
    return PromptsChecked(plan, prompts, rewards, tools)


def check_tools(run: Run, prompts) -> Tools:
    """Every tool loaded and checked, the template shown able to carry a tool conversation and to have its tool
    calls read back, and every tool call already in the prompts naming a tool the run has (exit 2 on each)."""
    recipe = run.recipe
    tools = resolve_tools(recipe.tools)
    found = preflight_tokenizer(recipe.model, recipe.template.name, run.source(), run.target)
    if found is not None:
        install_response_parser(found[0], recipe.template.name, dict(recipe.template.kwargs))
    default = row_mode(None, recipe.template.kwargs)
    per_row_modes = recipe.template.name != MODEL_TEMPLATE and resolve_template(recipe.template.name).reads_mode_flags
    for split in (prompts.train, prompts.eval):
        for index, row in enumerate(split if split is not None else ()):
            problem = unknown_tool_problem(row["prompt"], set(tools.names), "prompt")
            if problem:
                raise SmolalignError(f"prompt row {index}: {problem}")
            mode = row_mode(None, row["chat_template_kwargs"]) if per_row_modes else default
            if mode != default:
                raise SmolalignError(
                    f"prompt row {index}: asks for {mode} mode (its system flag or chat_template_kwargs) where the "
                    f"recipe's is {default}; with tools, TRL renders the turn after each tool result in the recipe's "
                    "mode, so the answer would switch modes after its first call. Give every row the recipe's mode "
                    "(template.kwargs.enable_thinking), or train each mode in its own run")
    return tools


def add_tools_row(plan, run: Run, tools: Tools) -> None:
    section = run.recipe.tools
    levels = {tool.level for tool in tools.held if isinstance(tool, PythonTool)}
    sandbox = f" (python in the {levels.pop()} sandbox)" if levels else ""
    plan.rows["tools"] = (f"{', '.join(tools.names)}{sandbox}: at most {section.max_turns} calls per answer, "
                          f"{section.timeout:g} s each, results cut at {section.max_output_chars} characters; "
                          "tool results carry no loss")


def check_prompts_and_rewards(run: Run, rendered_kwargs: dict | None = None):
    """What every generating method checks before a model loads: the prompt rows (read, a sample rendered and
    tokenized with the generation prompt), the rewards (the run's, built when it was resolved: the columns they read
    present, every row a reward checks (math_accuracy: its gold answer parses), a team's function's signature and one
    call on the first row). Returns (prompts, rewards, the data check)."""
    recipe = run.recipe
    rewards = list(run.rewards.training)
    rows = read_prompt_rows(run.data)
    checked = check_prompt_rows(run, rows.train, run.data.seed, recipe.template.kwargs)
    prompts = recipe_prompts(recipe, rows, rendered_kwargs)
    named = [(s.name, r) for s, r in zip(recipe.rewards, rewards, strict=True)]
    check_reward_columns(named, prompts.train.column_names)
    for split in (rows.train, rows.eval):
        if split is not None:
            check_reward_rows(named, split)
    for spec, reward in zip(recipe.rewards, rewards, strict=True):
        check_team_reward(spec.name, reward, prompts.train.column_names, prompts.train[0])
    return prompts, rewards, checked


def add_rl_rows(plan, run: Run) -> None:
    recipe, settings, rows = run.recipe, run.settings, plan.rows
    for key in ("packing", "loss", "tokens per step"):
        rows.pop(key, None)
    rows["method"] = (f"grpo (loss {settings['loss_type']}, scale_rewards {settings['scale_rewards']}, "
                      f"beta {settings['beta']:g}, {settings['num_generations']} generations per prompt)")
    rows["sampling"] = (f"{plan.rows['global batch']} completions per step of ≤ {settings['max_completion_length']} "
                        f"tokens, temperature {settings['temperature']:g}")
    rows["rewards"] = " + ".join(f"{r.weight:g}×{r.name}" for r in recipe.rewards)

    rows["generation"] = describe_generation(recipe.generation)


def add_sandbox_row(plan, rewards) -> None:
    """The isolation level of the code reward's sandbox, since it decides what generated code can reach."""
    pools = [reward.pool for reward in rewards if getattr(reward, "pool", None) is not None]
    if pools:
        pool = pools[0]
        hint = "" if pool.level == "bwrap" else " (bubblewrap is stronger: apt-get install bubblewrap)"
        plan.rows["sandbox"] = f"{pool.level}, {pool.workers} workers{hint}"


def grpo_config(run: Run, hardware: Hardware, run_dir: Path, server: ServerAddress | None, *,
                check: bool = False):
    recipe = run.recipe
    fixed: dict = {"reward_weights": [r.weight for r in recipe.rewards]}
    if recipe.tools is not None:
        fixed["max_tool_calling_iterations"] = recipe.tools.max_turns
    if recipe.template.kwargs:
        fixed["chat_template_kwargs"] = dict(recipe.template.kwargs)
    fixed.update(vllm_fields(recipe.generation, server))
    return trl_config(run, hardware, run_dir, check=check, **fixed)


def load(run: Run, opened: OpenRun, checked: PromptsChecked) -> AbstractContextManager:
    """GRPO's trainer on the policy, the prompts and the rewards (and the tools it calls), with its generation
    served."""
    return load_generating(run, opened, checked, grpo_config)


def rewards_of_whole_answers(rewards: list, template, kwargs: dict, tokenizer, say: bool = True) -> list:
    """The rewards, each reading an answer whole where the template's generation prompt opens the think block the
    model then writes (`<think>\n`, as reasoning models' templates do): TRL hands the rewards the generated text
    alone, whose reasoning would read as the answer (rewards.text.WithPrefill)."""
    specials = {k: v for k, v in tokenizer.special_tokens_map.items() if isinstance(v, str)}
    prefill = opened_think(template, dict(kwargs), specials)
    if not prefill:
        return rewards
    if say:  # the main process
        print(f"note: template {template.name} opens the think block in its generation prompt ({prefill!r}): the "
              "rewards read each answer with it in front", file=sys.stderr)
    return [WithPrefill(reward, prefill) for reward in rewards]


@contextmanager
def load_generating(run: Run, opened: OpenRun, checked: PromptsChecked, make_config) -> Iterator[tuple]:
    """What an rl method whose policy generates while it trains (GRPO, online DPO) loads: the tokenizer, then, with
    the generation served (`stages.generating`), the config (`make_config(run, hardware, run_dir, server)`)
    and the model; yields the trainer (on those, and the prompts and rewards `check` built, and GRPO's tools) and
    the tokenizer. The tools' sandbox stops when the run does."""
    recipe, hardware, dtype = run.recipe, run.hardware, opened.dtype
    prompts, tools = checked.prompts, checked.tools
    tokenizer, template = load_tokenizer(recipe.model, recipe.template.name, run.source())
    rewards = rewards_of_whole_answers(checked.rewards, template, recipe.template.kwargs, tokenizer,
                                       say=opened.state.is_main_process)
    trainer_type, with_tools = opened.trainer, {}
    if tools is not None:
        install_response_parser(tokenizer, recipe.template.name, dict(recipe.template.kwargs))
        trainer_type = tool_grpo_trainer(tools)
        with_tools = {"tools": tools.functions or None, "environment_factory": tools.environment_factory}
    try:
        with generating(run, opened) as generation:
            # The config comes before the model: under ZeRO-3 it is what makes the model load sharded.
            args = make_config(run, hardware, opened.run_dir, generation.server)
            model = load_model(recipe.model, dtype, hardware, tokenizer, run.source())
            start_run(run, opened)
            trainer = trainer_type(
                model=model, reward_funcs=rewards, args=args, train_dataset=prompts.train,
                eval_dataset=prompts.eval, processing_class=tokenizer, peft_config=peft_config(run),
                callbacks=[metrics_callback(opened.run_dir), generation.watchdog.callback()], **with_tools)
            generation.check_syncs(trainer)
            del model  # the trainer holds it; finish() frees it before an evaluation
            yield trainer, tokenizer
    finally:
        if tools is not None:
            tools.close()


STAGE = Stage(check_before_loading, load, summary=("reward",), generates=True, check_batch=check_batch)
