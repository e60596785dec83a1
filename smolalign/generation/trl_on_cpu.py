"""What TRL 1.16's vLLM paths need on a CPU, applied while a stage that generates with vLLM (GRPO, online DPO,
distillation) loads and trains (stages.library_patches), and nowhere else (docs/vllm-cpu.md):

- colocated (`generation.backend: vllm_colocate`): the engine TRL builds gets this machine's settings
  (vllm_engine.engine_options: the generation precision, a KV cache for the sequences TRL runs at once), and keeps
  its linear weights as plain tensors (vLLM's oneDNN and, on AMX in bf16, SGL prepacking, which replace them, are
  off while it loads), so that TRL's per-parameter weight sync can write them, and its model class is inspected in
  this process (vllm_inspection.py);
- server (`vllm_server`): TRL's client syncs weights over NCCL, which needs CUDA (`init_communicator` raises on a
  CPU). `CpuSyncClient` is TRL's `VLLMClient` with the transfer replaced: the weights TRL streams are written to a
  safetensors file the server's machine reads, and the server's workers reload them (vLLM's `reload_weights`, through
  its development endpoint `/collective_rpc`), before TRL resets the prefix cache. The file goes once the server has
  read it, and its folder when the process exits (as TRL's client closes itself). Everything else (generation,
  log-probs, the cache reset) is TRL's own client talking to the real server.

On a GPU nothing here applies: TRL builds and syncs its engines itself.
"""

import atexit
import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from smolalign.generation.vllm_engine import engine_options
from smolalign.generation.vllm_inspection import inspected_here
from smolalign.hardware import Hardware
from smolalign.library_patch import replaced

WEIGHTS_FILE = "model.safetensors"


def cpu_sync_client_class():
    """TRL's VLLMClient with its NCCL weight transfer replaced by a file the server reloads (see the docstring)."""
    from trl.generation.vllm_client import VLLMClient

    class CpuSyncClient(VLLMClient):
        sync_dir: Path | None = None
        syncs = 0

        def init_communicator(self, device=0):
            self.sync_dir = Path(tempfile.mkdtemp(prefix="smolalign-vllm-sync-"))
            self._pending: dict = {}
            atexit.register(self.close_communicator)  # as TRL's own client does: nothing else closes it

        def _start_weight_update(self):
            pass

        def _finish_weight_update(self):
            self._reload()

        def update_named_params(self, metadata, named_params):
            for name, tensor in named_params:
                self._pending[name] = tensor.detach().to("cpu", copy=True).contiguous()

        def reset_prefix_cache(self):
            self._reload()  # TRL resets the cache once every tensor of a sync is sent
            super().reset_prefix_cache()

        def _reload(self):
            if not getattr(self, "_pending", None):
                return
            from safetensors.torch import save_file

            if "lm_head.weight" not in self._pending and "model.embed_tokens.weight" in self._pending:
                # Tied embeddings: the trainer lists the shared tensor once, under the embeddings' name; vLLM's reload
                # rebuilds each parameter from the file and would leave the head on its old weights.
                self._pending["lm_head.weight"] = self._pending["model.embed_tokens.weight"].clone()
            save_file(self._pending, str(self.sync_dir / WEIGHTS_FILE))
            self._post(f"{self.base_url}/collective_rpc",
                       json={"method": "reload_weights", "kwargs": {"weights_path": str(self.sync_dir)}})
            (self.sync_dir / WEIGHTS_FILE).unlink()  # read by then: a copy of the model need not wait in /tmp
            self._pending = {}
            self.syncs += 1

        def close_communicator(self):
            if self.sync_dir is not None:
                shutil.rmtree(self.sync_dir, ignore_errors=True)

    return CpuSyncClient


@contextlib.contextmanager
def trl_generation_on_cpu(generation, hardware: Hardware, *, dtype: str, sequence_tokens: int) -> Iterator[None]:
    """While it is open: on a CPU, TRL's colocated engines built with this machine's settings and writable weights,
    or TRL's server client syncing through the filesystem (see the module docstring). Nothing on a GPU or with the
    transformers backend."""
    if hardware.on_gpu or generation is None or generation.backend == "transformers":
        yield
        return
    from trl.experimental.online_dpo import online_dpo_trainer
    from trl.generation import vllm_generation

    builders = (vllm_generation, online_dpo_trainer)  # where TRL 1.16 builds its engines and clients
    with contextlib.ExitStack() as patches:
        if generation.backend == "vllm_server":
            client = cpu_sync_client_class()
            for module in builders:
                patches.enter_context(replaced(module, "VLLMClient", lambda trl_client: client))
        else:
            for module in builders:
                patches.enter_context(replaced(module, "LLM", lambda trl_llm: _engine_builder(
                    trl_llm, hardware, dtype=dtype, sequence_tokens=sequence_tokens)))
            _keep_linear_weights(patches)
        yield


def _engine_builder(llm_class, hardware: Hardware, *, dtype: str, sequence_tokens: int):
    """`llm_class(**kwargs)` (vLLM's LLM) with this machine's engine options over TRL's, its model class inspected
    in this process."""

    def build(model: str, **kwargs):
        options = engine_options(model, hardware, dtype=dtype, sequence_tokens=sequence_tokens,
                                 sequences=kwargs.get("max_num_seqs") or 1, longest=kwargs.get("max_model_len"),
                                 tensor_parallel=kwargs.get("tensor_parallel_size") or 1)
        kwargs.pop("gpu_memory_utilization", None)
        with inspected_here(hardware):
            return llm_class(**{**kwargs, **options})

    return build


def _keep_linear_weights(patches: contextlib.ExitStack) -> None:
    """Both CPU paths that pack a linear layer's weights and drop `layer.weight` (oneDNN; on AMX in bf16, the SGL
    kernels) leave TRL's weight sync nothing to write to: off while `patches` is open, so F.linear reads the weights
    in place."""
    import vllm._custom_ops as custom_ops
    import vllm.model_executor.layers.utils as layer_utils

    patches.enter_context(replaced(custom_ops, "_supports_onednn", lambda supported: False))
    patches.enter_context(replaced(layer_utils, "check_cpu_sgl_kernel", lambda check: lambda *args: False))
