"""The plan's rows for graded pairs, worked out before anything loads: the scorer, candidates per prompt, the
generations to expect and the memory of every model that will be resident (the sampler while it samples, then the
scorer's reward models), shown by `smolalign po recipes/quickstart/po_graded.yaml --dry-run`."""

from smolalign.estimate.dims import read_dims
from smolalign.estimate.inference import kv_cache_bytes, reward_model_parts
from smolalign.estimate.memory import DTYPE_BYTES
from smolalign.estimate.settings import hardware_planned_for
from smolalign.hardware import Hardware, generation_dtype
from smolalign.inputs.pairs_file import pairs_path
from smolalign.models.sources import resolve_source
from smolalign.pairs.prompts import load_prompts
from smolalign.pairs.scorer import run_scorer
from smolalign.quantities import describe_bytes
from smolalign.recipe.schema import Recipe
from smolalign.resolve import Run


def add_graded_rows(rows: dict, run: Run, state: str) -> None:
    recipe, pairs = run.recipe, run.recipe.pairs
    graded, sampler = pairs.graded, pairs.graded.sampler
    kind = (f"unpaired KTO rows (label: score ≥ {graded.threshold:g})" if graded.unpaired
            else f"pairs ({graded.pick.replace('_', ' vs ')})")
    rows["pairs"] = (f"{state}: graded {kind}, {graded.n} candidates per prompt from {sampler.source} "
                     f"({sampler.backend}, temperature {sampler.temperature:g}), prompts dropped when best - worst "
                     f"< {graded.margin:g} or tied -> {pairs_path(recipe)}")
    scorer = run_scorer(run, "scorer")
    prompt_set = load_prompts(recipe)
    scorer.check(prompt_set.prompts)
    rows["scorer"] = scorer.describe()
    prompts = len(prompt_set.prompts)
    bound = "≤ " if pairs.max_prompt_tokens is not None else ""
    rows["generations"] = (f"{bound}{prompts * graded.n} answers ({bound}{prompts} prompts × {graded.n}), "
                           f"{graded.n * sampler.batch_size} sequences per call, ≤ {sampler.max_new_tokens} tokens each")
    rows["pairs memory"] = _memory(recipe, hardware_planned_for(run))


def _memory(recipe: Recipe, hardware: Hardware) -> str:
    """Sampler weights and KV cache while sampling; then, with the sampler freed, the reward models."""
    pairs = recipe.pairs
    sampler, n = pairs.graded.sampler, pairs.graded.n
    parts = []
    sampling = 0
    if sampler.backend == "openai":
        parts.append(f"sampler served at {sampler.base_url} (nothing resident here)")
    else:
        dims = read_dims(resolve_source(sampler.source), "pairs.graded.sampler.source")
        if dims is None:
            parts.append("sampler: size unknown before loading")
        else:
            dtype = generation_dtype("auto", hardware, dims.hidden)
            tokens = (pairs.max_prompt_tokens or 0) + sampler.max_new_tokens
            weights = dims.params * DTYPE_BYTES.get(dtype, 4)
            cache = kv_cache_bytes(dims, sampler.batch_size * n, tokens, dtype)
            sampling = weights + cache
            what = "max_prompt_tokens + max_new_tokens" if pairs.max_prompt_tokens else "max_new_tokens, + prompts"
            parts.append(f"sampling: {describe_bytes(weights)} sampler weights ({dtype}) + ≤ {describe_bytes(cache)} "
                         f"KV cache ({sampler.batch_size * n} sequences × {what})")
    scoring = reward_model_parts(pairs.graded.scorer, hardware)
    if scoring:
        parts.append("then scoring: " + ", ".join(f"{describe_bytes(v)} {k}" for k, v in scoring.items()))
    peak = max(sampling, sum(scoring.values()))
    if peak:
        parts.append(f"peak {describe_bytes(peak)} (the sampler is freed before scoring)")
    return "; ".join(parts)
