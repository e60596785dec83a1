"""The vLLM server's command line (smolalign.generation.server_command), built once for a run here and for a Slurm
job's server node: the words the Slurm node gives `trl vllm-serve`, read by TRL's own parser and turned into a command
by TRL's own builder, are the command a run here starts, but for what differs by design (the address it listens on,
eager mode on a CPU, the name it serves under)."""

import sys

from recipe_runs import run_of
from tiny_models import write_jsonl

from smolalign.generation.server_command import SERVER_MODULE, serve_options, server_command, trl_serve_command
from smolalign.hardware import Hardware

GPU = Hardware("cuda", 8, "H100", True, 1, 16)


def server_recipe(tmp_path):
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "1+1?", "solution": "2"}])
    raw = {"model": {"source": "some-org/some-model", "revision": "v2", "trust_remote_code": True},
           "data": {"sources": [{"path": str(prompts)}]}, "rewards": [{"name": "math_accuracy"}],
           "generation": {"backend": "vllm_server", "server": {"port": 8123, "tensor_parallel": 2}},
           "train": {"vllm_max_model_length": 1536}}
    return run_of(raw, "rl", "test", check=False)  # written here for a GPU machine


def option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def test_the_slurm_node_runs_the_command_a_run_here_starts(tmp_path):
    from trl import TrlParser
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    recipe = server_recipe(tmp_path)
    here = server_command(recipe, "bfloat16", GPU, "smolalign-abc", 8123)
    slurm = trl_serve_command(serve_options(recipe, host="127.0.0.1", port=8123, dtype="bfloat16"))
    assert slurm[:2] == ["trl", "vllm-serve"]
    [parsed] = TrlParser(ScriptArguments).parse_args_into_dataclasses(args=slurm[2:])
    on_the_node = build_command(parsed)
    assert here == [sys.executable, "-m", SERVER_MODULE, "--model", "some-org/some-model",
                    *on_the_node[on_the_node.index("serve") + 2:], "--served-model-name", "smolalign-abc"]
    # what the recipe says, in vLLM's own option names (independently of both builders)
    assert option(here, "--revision") == "v2" and "--trust-remote-code" in here
    assert option(here, "--tensor-parallel-size") == "2" and option(here, "--port") == "8123"
    assert option(here, "--dtype") == "bfloat16" and option(here, "--max-model-len") == "1536"
    assert "--enforce-eager" not in here  # on a GPU: CUDA graphs


def test_the_slurm_node_listens_on_every_interface_and_a_cpu_server_runs_eager(tmp_path):
    recipe = server_recipe(tmp_path)
    slurm = trl_serve_command(serve_options(recipe, host="0.0.0.0", port=8123, dtype=recipe.recipe.model.dtype))
    assert option(slurm, "--host") == "0.0.0.0" and "--dtype" not in slurm  # model.dtype auto: vLLM decides
    assert option(slurm, "--model") == "some-org/some-model" and option(slurm, "--max_model_len") == "1536"
    assert "--trust_remote_code" in slurm and "--enforce_eager" not in slurm
    cpu = serve_options(recipe, host="127.0.0.1", port=8123, dtype="float32", enforce_eager=True)
    assert cpu["enforce_eager"] is True and cpu["dtype"] == "float32"
