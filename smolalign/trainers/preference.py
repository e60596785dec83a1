"""TRL's preference trainers (and the reward model trainer), fed rows smolalign already tokenized and checked
(`data.prepare_preference`).

Each subclass replaces only the trainer's own dataset preparation; losses, reference handling, collators and
logging are TRL's.
"""

import copy
import os

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from datasets.fingerprint import Hasher  # noqa: E402
from trl import DPOTrainer, KTOTrainer, RewardTrainer  # noqa: E402
from trl.experimental.orpo import ORPOTrainer  # noqa: E402

REFERENCE_SETTINGS = ("max_length", "truncation_mode", "ld_alpha", "pad_to_multiple_of", "padding_free",
                      "use_logits_to_keep", "bf16", "fp16")
"""DPOConfig fields that change the reference's log-probs of the same rows."""


class PreparedDPOTrainer(DPOTrainer):
    def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
        """The prepared rows (prompt_ids / chosen_ids / rejected_ids, prompts within max_length). With
        precompute_ref_log_probs, TRL keeps the reference's log-probs in a file beside the rows named by their
        fingerprint and the weights: the rows' fingerprint gets the settings that change those log-probs too, or a
        run with another truncation_mode or ld_alpha would read the log-probs computed under the old one."""
        if not args.precompute_ref_log_probs:
            return dataset
        keyed = copy.copy(dataset)
        keyed._fingerprint = Hasher.hash((dataset._fingerprint, {k: getattr(args, k, None) for k in REFERENCE_SETTINGS}))
        return keyed


class PreparedKTOTrainer(KTOTrainer):
    def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
        if not self.calculate_KL:
            return dataset

        # KTO's KL term scores mismatched (prompt, completion) pairs: completions rotated by one within each
        # batch, exactly as TRL builds them.
        def add_kl_completion_ids(batch):
            batch["KL_completion_ids"] = [batch["completion_ids"][-1]] + batch["completion_ids"][:-1]
            return batch

        return dataset.map(add_kl_completion_ids, batched=True, batch_size=args.per_device_train_batch_size,
                           keep_in_memory=True)


class PreparedORPOTrainer(ORPOTrainer):
    def tokenize_row(self, feature, model=None) -> dict:
        """ORPO's row layout (prompt_*, chosen_*, rejected_* with -100 labels on the prompt) from our ids,
        answers cut to max_length as ORPO does."""
        prompt = list(feature["prompt_ids"])
        row = {"prompt_input_ids": prompt, "prompt_attention_mask": [1] * len(prompt)}
        for side in ("chosen", "rejected"):
            answer = list(feature[f"{side}_ids"])[:max(0, self.max_length - len(prompt))]
            ids = prompt + answer
            row[f"{side}_input_ids"] = ids
            row[f"{side}_attention_mask"] = [1] * len(ids)
            row[f"{side}_labels"] = [-100] * len(prompt) + answer
        return row


class PreparedRewardTrainer(RewardTrainer):
    def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
        """Each side as one sequence, prompt + answer (the score is read at its last token). A pair with a side
        over max_length, which TRL drops here, was dropped when the data was prepared, before the model loaded
        (`data.prepare_preference.length_drops`)."""
        def join(row):
            return {"chosen_ids": row["prompt_ids"] + row["chosen_ids"],
                    "rejected_ids": row["prompt_ids"] + row["rejected_ids"]}

        return dataset.map(join, remove_columns=["prompt_ids"], keep_in_memory=True)
