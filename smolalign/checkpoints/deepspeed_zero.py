"""DeepSpeed ZeRO (stage 1-3) checkpoints consolidated into full weights with DeepSpeed's own
`zero_to_fp32.get_fp32_state_dict_from_zero_checkpoint` (lazy mode: each tensor is gathered from the partitions
when it is written). What is ours: the tag from `latest`, the `module.` prefix dropped, the duplicated tied lm_head
dropped, and the weights checked against the architecture before anything is written."""

import pickle

from smolalign.checkpoints.dcp import torch_equal
from smolalign.checkpoints.detect import Detected
from smolalign.checkpoints.files import check_torch_archive
from smolalign.checkpoints.plan import TensorPlan
from smolalign.errors import SmolalignError

INSTALL_HINT = "pip install 'smolalign[deepspeed]'"


def deepspeed_plan(detected: Detected, tied: bool) -> tuple[list[TensorPlan], str]:
    """(plan, layout) for a ZeRO checkpoint: fp32 master weights, HF names as the HF Trainer saved them."""
    try:
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
    except ImportError:
        raise SmolalignError(f"DeepSpeed checkpoint {detected.path}: consolidating ZeRO partitions needs deepspeed, "
                             f"which is not installed: {INSTALL_HINT}") from None
    for file in sorted((detected.path / detected.tag).glob("*.pt")):
        check_torch_archive(file)
    try:
        state = get_fp32_state_dict_from_zero_checkpoint(str(detected.path), tag=detected.tag, lazy_mode=True)
    except (ValueError, FileNotFoundError, KeyError, RuntimeError, EOFError, pickle.UnpicklingError) as exc:
        raise SmolalignError(f"DeepSpeed checkpoint {detected.path} ({detected.tag}): "
                             f"{(str(exc).splitlines() or [type(exc).__name__])[0]}") from None
    names = {key.removeprefix("module."): key for key in state}
    if tied and "lm_head.weight" in names and "model.embed_tokens.weight" in names:
        head, embedding = (state[names[n]].contiguous() for n in ("lm_head.weight", "model.embed_tokens.weight"))
        if not torch_equal(head, embedding):
            raise SmolalignError(f"DeepSpeed checkpoint {detected.path}: lm_head.weight differs from the embedding but "
                                 "the config ties them; use the config the model was trained with "
                                 "(tie_word_embeddings false)")
        del head, embedding
    ranks = len(list((detected.path / detected.tag).glob("*model_states.pt")))
    plan = []
    for key, value in state.items():
        name = key.removeprefix("module.")
        if tied and name == "lm_head.weight":
            continue  # zero_to_fp32 rebuilds tied weights from shared_params (checked equal above)
        plan.append(TensorPlan(name, tuple(value.shape), str(value.dtype).removeprefix("torch."),
                               lambda value=value: value.contiguous()))
    return plan, f"ZeRO, {ranks} model-state file(s), tag {detected.tag}"
