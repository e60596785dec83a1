"""`tool_format`: whether an answer used its tools well, read from its whole trajectory (`rewards.trajectory`).

Scores, per completion:
- 0.0 when a `<tool_call>` block could not be read (malformed JSON, no name), or no answer came (the turn limit or
  the completion budget stopped it while it still called a tool);
- 0.0 when `require_call` is set and no tool was called;
- otherwise 1.0 less `error_penalty` times the share of calls whose result was an error (the tool raised, ran out of
  time, or no tool has that name).
A plain single-turn answer with no call scores 1.0 (0.0 with `require_call`).
"""

from rewards.trajectory import read_trajectory


class ToolFormat:
    """`tool_format`: 1.0 for an answer whose tool calls were all well formed and ran, reached after them; 0.0 for a
    malformed call or no answer; less for calls that returned errors.

    Args:
        require_call: score 0.0 for an answer that called no tool (for tasks where the tool is the point).
        error_penalty: taken off 1.0 in proportion to the share of calls whose result was an error (0 to 1).
    """

    def __init__(self, require_call: bool = False, error_penalty: float = 0.5):
        if not 0.0 <= error_penalty <= 1.0:
            raise ValueError(f"error_penalty must be between 0 and 1, got {error_penalty}")
        self.require_call, self.error_penalty = require_call, error_penalty
        self.required_columns = ()
        self.__name__ = "tool_format"

    def score(self, completion) -> float:
        trajectory = read_trajectory(completion)
        if trajectory.malformed_calls or not trajectory.answered:
            return 0.0
        if trajectory.calls == 0:
            return 0.0 if self.require_call else 1.0
        return 1.0 - self.error_penalty * min(trajectory.tool_errors / trajectory.calls, 1.0)

    def __call__(self, completions: list, **columns) -> list[float]:
        return [self.score(completion) for completion in completions]
