"""`smolalign rl`: GRPO on TRL's GRPOTrainer with smolalign's verifiable rewards.

smolalign reads the prompts through the data mixture (smolalign.data.prompts, which carries each row's think mode
into its prompt), checks the columns every reward reads before any model loads, maps the rewards and weights onto
TRL, and picks the generation backend: transformers `generate`, vLLM colocated in the training process, or a vLLM
server (one that runs, or one it starts, health-checks and stops).
A watchdog fails the run when no step finishes within `generation.stall_timeout`, instead of hanging.
"""

from pathlib import Path

from smolalign.errors import SmolalignError
from smolalign.hardware import Hardware, detect_hardware, resolve_dtype
from smolalign.plan import make_plan
from smolalign.recipe.schema import Recipe
from smolalign.stages.common import announce, finish, open_run, peft_config, train_and_save, trl_config
from smolalign.templates.registry import MODEL_TEMPLATE, resolve_template

DEFAULT_VLLM_STALL_TIMEOUT = 1800.0


def build_rewards(recipe: Recipe) -> list:
    from rewards.registry import resolve_reward

    return [resolve_reward(r.name, r.params) for r in recipe.rewards]


def check_batch(recipe: Recipe, hardware: Hardware) -> None:
    train = recipe.train
    generations = train.get("num_generations", 8)
    per_device = train.get("per_device_train_batch_size", 8)
    batch = per_device * train.get("gradient_accumulation_steps", 1) * hardware.world_size
    if train.get("generation_batch_size") is None and train.get("steps_per_generation") is None \
            and batch % generations:
        raise SmolalignError(f"train.num_generations {generations} must divide the generation batch "
                             f"(per-device {per_device} × accumulation × {hardware.world_size} processes = {batch}); "
                             "change one of them or set train.generation_batch_size")
    if generations < 2:
        raise SmolalignError("train.num_generations must be at least 2 (GRPO compares the answers of a group)")


def check_before_loading(recipe: Recipe, hardware: Hardware):
    from rewards.registry import check_reward_columns
    from smolalign.data.prompts import recipe_prompts
    from smolalign.models.sources import resolve_model

    resolve_model(recipe.model)
    template = None if recipe.template.name == MODEL_TEMPLATE else resolve_template(recipe.template.name)
    check_batch(recipe, hardware)
    rewards = build_rewards(recipe)
    prompts = recipe_prompts(recipe)
    check_reward_columns([(s.name, r) for s, r in zip(recipe.rewards, rewards, strict=True)],
                         prompts.train.column_names)
    plan = make_plan(recipe, hardware, template, len(prompts.train), data_format="prompt")
    add_rl_rows(plan, recipe)
    return plan, prompts, rewards


def add_rl_rows(plan, recipe: Recipe) -> None:
    train, rows = recipe.train, plan.rows
    for key in ("packing", "loss", "tokens per step"):
        rows.pop(key, None)
    generations = train.get("num_generations", 8)
    rows["method"] = (f"grpo (loss {train.get('loss_type', 'dapo')}, scale_rewards {train.get('scale_rewards', 'group')}, "
                      f"beta {train.get('beta', 0.0):g}, {generations} generations per prompt)")
    rows["sampling"] = (f"{plan.rows['global batch']} completions per step of ≤ {train.get('max_completion_length', 512)} "
                        f"tokens, temperature {train.get('temperature', 1.0):g}")
    rows["rewards"] = " + ".join(f"{r.weight:g}×{r.name}" for r in recipe.rewards)
    backend = recipe.generation.backend
    if backend == "vllm_server":
        server = recipe.generation.server
        where = server.base_url or f"started by smolalign on GPUs {server.gpus or 'all'} port {server.port}"
        rows["generation"] = f"vLLM server ({where})"
    else:
        rows["generation"] = {"transformers": "transformers generate", "vllm_colocate": "vLLM colocated"}[backend]


def grpo_config(recipe: Recipe, hardware: Hardware, dtype: str, run_dir: Path, base_url: str | None):
    from trl import GRPOConfig

    fixed: dict = {"reward_weights": [r.weight for r in recipe.rewards]}
    if recipe.template.kwargs:
        fixed["chat_template_kwargs"] = dict(recipe.template.kwargs)
    backend = recipe.generation.backend
    if backend != "transformers":
        fixed.update(use_vllm=True, vllm_mode="colocate" if backend == "vllm_colocate" else "server")
        if base_url:
            fixed["vllm_server_base_url"] = base_url
    return trl_config(GRPOConfig, recipe.train, hardware, dtype, run_dir, **fixed)


def run(recipe: Recipe, *, output_dir: Path | None = None, dry_run: bool = False, resume: bool = False,
        overwrite: bool = False) -> Path | None:
    from smolalign.stages.rl_server import served_generation

    if recipe.method.trainer != "grpo":
        from smolalign.stages import distill

        return distill.run(recipe, output_dir=output_dir, dry_run=dry_run, resume=resume, overwrite=overwrite)
    hardware = detect_hardware()
    plan, prompts, rewards = check_before_loading(recipe, hardware)
    evaluation = announce(recipe, plan, dry_run)
    if dry_run:
        return None
    from trl import GRPOTrainer

    from smolalign.models.load import load_model, load_tokenizer
    from smolalign.runs.metrics import metrics_callback
    from smolalign.runs.watchdog import stall_watchdog

    run_dir, checkpoint, state = open_run(recipe, hardware, output_dir, resume=resume, overwrite=overwrite)
    tokenizer, template = load_tokenizer(recipe.model, recipe.template.name)
    dtype = resolve_dtype(recipe.model.dtype, hardware)
    stall = recipe.generation.stall_timeout
    if stall is None and recipe.generation.backend != "transformers":
        stall = DEFAULT_VLLM_STALL_TIMEOUT
    with served_generation(recipe, state) as server, stall_watchdog(stall, server) as watchdog:
        # The config comes before the model: under ZeRO-3 it is what makes the model load sharded.
        args = grpo_config(recipe, hardware, dtype, run_dir, server.base_url if server else None)
        model = load_model(recipe.model, dtype, hardware, tokenizer)
        trainer = GRPOTrainer(model=model, reward_funcs=rewards, args=args, train_dataset=prompts.train,
                              eval_dataset=prompts.eval,
                              processing_class=tokenizer, peft_config=peft_config(recipe),
                              callbacks=[metrics_callback(run_dir), watchdog.callback()])
        model_dir = train_and_save(trainer, tokenizer, run_dir, checkpoint)
    return finish(trainer, run_dir, model_dir, evaluation, "reward")
