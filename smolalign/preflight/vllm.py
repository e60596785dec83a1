"""The preflight checks of a recipe's vLLM choices (rl generation, pairs, eval): vLLM installed for the target (its
CUDA build on GPUs, its CPU build on a CPU) and, on this machine, really importing; a started server's GPUs that
exist, and no sleep mode on a CPU. Whether vLLM installs and imports is generation.vllm_install's, which the
generation code asks too before it builds an engine."""

from smolalign.generation.vllm_install import vllm_import_problem, vllm_install
from smolalign.resolve import Run


def needs_vllm(key: str, target, fallback: str) -> str | None:
    """vLLM is installed for the target (its CUDA build on GPUs, its CPU build on a CPU), and on this machine it
    really imports."""
    if not target.has("vllm"):
        return f"{key}: vLLM is not installed ({vllm_install(target.gpus)}) or use {fallback}"
    if target.here and (problem := vllm_import_problem()):
        return f"{key}: vLLM is installed but does not import ({problem}); {vllm_install(target.gpus)}, or use {fallback}"
    return None


def check_rl_generation(run: Run) -> str | None:
    recipe, target = run.recipe, run.target
    generation = recipe.generation
    if generation is None or generation.backend == "transformers":
        return None
    problem = needs_vllm(f"generation.backend {generation.backend}", target, "generation.backend: transformers")
    if not problem and target.gpus < 1 and recipe.train.get("vllm_enable_sleep_mode"):
        return ("train.vllm_enable_sleep_mode: vLLM's CPU build has no sleep mode (it frees GPU memory between "
                "generations); set it to false on a CPU")
    if problem or generation.backend != "vllm_server" or generation.server.base_url or target.server_node \
            or target.gpus < 1:
        return problem  # on a CPU a started server shares the machine with training
    server = generation.server
    beyond = [g for g in server.gpus if g >= target.gpus]
    if beyond:
        return (f"generation.server.gpus {server.gpus}: {target.where} has GPUs 0-{target.gpus - 1}; name GPUs "
                "that exist")
    return None  # enough GPUs for the server and the training processes: check_processes


def check_pairs(run: Run) -> str | None:
    recipe, target = run.recipe, run.target
    if recipe.pairs is None:
        return None
    for side, section in recipe.pairs.generators.items():
        if section.backend == "vllm":
            key = "pairs.graded.sampler" if side == "graded" else f"pairs.{side}"
            problem = needs_vllm(f"{key}.backend vllm", target, "backend: transformers")
            if problem:
                return problem
    return None


def check_eval(run: Run) -> str | None:
    recipe, target = run.recipe, run.target
    if recipe.evaluation is None or recipe.evaluation.backend != "vllm":
        return None
    return needs_vllm("eval.backend vllm", target, "eval.backend: transformers")
