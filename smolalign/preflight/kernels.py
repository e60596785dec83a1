"""The preflight checks of a recipe's kernels: its attention implementation (flash-attn installed and a GPU, flex
attention in this torch, a hub kernel's package) and Liger's kernels (installed, and a GPU to run on)."""

from smolalign.resolve import Run

ATTENTION_DEFAULT = "flex_attention"
"""What the shipped GPU recipes name: built into torch (nothing to install in the image), and transformers builds
its mask from the packed rows' position_ids as a sparse BlockMask, so packed rows stay apart without the dense
(sequence × sequence) mask sdpa needs (65k tokens: a 4 GiB boolean mask per forward, and no flash kernel)."""

FLASH_ATTENTION = {"flash_attention_2": ("flash_attn", "pip install flash-attn --no-build-isolation"),
                   "flash_attention_3": ("flash_attn_interface", "build flash-attention's hopper/ directory")}


def check_attention(run: Run) -> str | None:
    recipe, target = run.recipe, run.target
    name = recipe.model.attn_implementation
    if name in (None, "eager", "sdpa"):
        return None
    if name == "flex_attention":
        if not target.has("torch.nn.attention.flex_attention"):
            return "model.attn_implementation flex_attention: this torch has no flex attention (torch >= 2.5)"
        return None
    if name in FLASH_ATTENTION:
        module, install = FLASH_ATTENTION[name]
        if not target.has(module):
            return (f"model.attn_implementation {name}: {module} is not installed in {target.where} ({install}), or "
                    f"use {ATTENTION_DEFAULT} (built into torch, keeps packed rows apart)")
        if target.gpus < 1:
            return f"model.attn_implementation {name}: needs a CUDA GPU and {target.where} has none; use sdpa"
        return None
    if "/" in name:  # a kernel from the hub, e.g. kernels-community/flash-attn
        if not target.has("kernels"):
            return (f"model.attn_implementation {name}: hub kernels need the kernels package (pip install kernels) "
                    f"and hub access; or use {ATTENTION_DEFAULT}")
        return None
    return (f"model.attn_implementation {name!r} is not an attention implementation; use {ATTENTION_DEFAULT}, sdpa, "
            "eager or flash_attention_2")


def check_liger(run: Run) -> str | None:
    recipe, target = run.recipe, run.target
    if not recipe.train.get("use_liger_kernel"):
        return None
    if not target.has("liger_kernel"):
        return "train.use_liger_kernel: liger-kernel is not installed (pip install 'smolalign[liger]'); or remove it"
    if target.gpus < 1:
        return f"train.use_liger_kernel: Liger's kernels run on a GPU and {target.where} has none; remove it"
    return None
