"""The scorer of generated answers (graded pairs' scorer, strong-vs-weak pairs' verifier): the recipe's rewards,
built when the run was resolved (`Run.rewards`) like GRPO's and eval's, and their weighted sum per answer; and the pick of the chosen and rejected candidates from the scores.

A candidate that one reward cannot score (None: an unparseable gold answer, a judge that timed out) gets no score
at all, rather than a sum that silently treats the missing part as 0.
"""

import random
from collections.abc import Callable
from dataclasses import dataclass

from rewards.errors import RewardError
from rewards.registry import check_reward_columns, check_scores, check_team_reward, trainer_extras
from smolalign.data.check import check_reward_rows
from smolalign.data.mixture import ORIGIN
from smolalign.errors import USER_ERRORS, SmolalignError
from smolalign.recipe.generation_schema import RewardSection
from smolalign.resolve import REWARD_KEYS, Run, reward_sections


@dataclass
class Scorer:
    sections: list[RewardSection]
    rewards: list[Callable]
    where: str
    """The recipe key the rewards are under (pairs.graded.scorer, pairs.verifier.rewards), for messages."""

    def describe(self) -> str:
        return " + ".join(f"{s.weight:g}×{s.name}" for s in self.sections)

    def provenance(self) -> list[dict]:
        return [{"name": s.name, "weight": s.weight, "params": s.params} for s in self.sections]

    def check(self, prompts: list) -> None:
        """The columns every reward reads are in the prompts' rows, every row a reward checks can be scored (a gold
        answer that parses), and a team's reward takes what it will be passed and scores the first prompt's row (the
        checks training makes of it)."""
        columns = [*sorted({c for p in prompts for c in p.columns}), "prompts", "chat_template_kwargs"]
        named = list(zip(self.sections, self.rewards, strict=True))
        try:
            check_reward_columns([(s.name, r) for s, r in named], columns)
            check_reward_rows([(s.name, r) for s, r in named], [{**p.columns, ORIGIN: p.origin} for p in prompts])
            if prompts:
                first = {"prompt": prompts[0].messages, **prompts[0].columns}
                for section, reward in named:
                    check_team_reward(section.name, reward, columns, first, text_completions=True)
        except USER_ERRORS as exc:
            raise SmolalignError(f"{self.where}: {exc}") from None

    def score(self, completions: list[str], columns: dict) -> tuple[list[float | None], list[dict]]:
        """(weighted sum or None, {reward name: its value}) per completion; `columns` as TRL passes them."""
        parts: list[dict] = [{} for _ in completions]
        for section, reward in zip(self.sections, self.rewards, strict=True):
            try:
                values = reward(completions=completions, **trainer_extras(), **columns)
                check_scores(section.name, values, len(completions))
            except RewardError as exc:
                raise SmolalignError(f"{self.where}: {exc}") from None
            except ValueError as exc:  # e.g. a length reward without token ids from a server: fix its parameters
                raise SmolalignError(f"{self.where}: reward {section.name}: {exc}") from None
            for part, value in zip(parts, values, strict=True):
                part[section.name] = None if value is None else float(value)
        totals = [None if any(v is None for v in part.values()) else
                  sum(s.weight * part[s.name] for s in self.sections) for part in parts]
        return totals, parts

    def close(self) -> None:
        for reward in self.rewards:
            if hasattr(reward, "close"):
                reward.close()


def run_scorer(run: Run, part: str) -> Scorer:
    """The run's built rewards of `part`, a field of `resolve.Rewards` ("scorer": pairs.graded.scorer, "verifier":
    pairs.verifier.rewards), as a scorer named by their recipe key."""
    return Scorer(list(reward_sections(run.recipe)[part]), list(getattr(run.rewards, part)), REWARD_KEYS[part])


def pick(scores: list[float | None], how: str, margin: float, rng: random.Random) -> tuple[int, int] | str:
    """(chosen index, rejected index) among the scored candidates, or why the prompt is dropped: "unscored" (fewer
    than two scores) or "tie" (best - worst is 0 or below the margin). The chosen one is the first best-scored
    candidate; best_worst rejects the first worst-scored one, best_random a random one at least `margin` below."""
    scored = [(i, s) for i, s in enumerate(scores) if s is not None]
    if len(scored) < 2:
        return "unscored"
    best = max(s for _, s in scored)
    worst = min(s for _, s in scored)
    if best == worst or best - worst < margin:
        return "tie"
    chosen = next(i for i, s in scored if s == best)
    if how == "best_worst":
        return chosen, next(i for i, s in scored if s == worst)
    return chosen, rng.choice([i for i, s in scored if s < best and best - s >= margin])
