"""TRL's online DPO trainer with its rewards given each answer's own tokens: TRL passes `completion_ids` rows cut
from the padded batch (pad tokens after the end of turn), where GRPO passes each answer's tokens through its end of
turn, so a reward that counts tokens (soft_overlong, cosine_length) saw every answer as long as the batch's longest.
recipe.method_table silences TRL's warning about its experimental trainers before it imports this module."""

from trl.experimental.online_dpo import OnlineDPOTrainer


def through_end_of_turn(ids: list[int], end_ids: list[int]) -> list[int]:
    """An answer's tokens up to and including its first end-of-turn token (all of them when it has none)."""
    ends = set(end_ids)
    return next((ids[:index + 1] for index, token in enumerate(ids) if token in ends), list(ids))


class UnpaddedRewardsOnlineDPOTrainer(OnlineDPOTrainer):
    def _calculate_rewards_from_functions(self, prompts, completions, completion_ids_list, **reward_kwargs):
        answers = [through_end_of_turn(ids, self.eos_token_ids) for ids in completion_ids_list]
        return super()._calculate_rewards_from_functions(prompts, completions, answers, **reward_kwargs)
