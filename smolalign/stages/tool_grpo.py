"""GRPO with tools: smolalign's GRPOTrainer (`trainers.grpo`), whose tool loop (TRL's) runs the calls and
hands every reward each answer's whole trajectory as its completion (the model's turns and the tools' results;
`rewards.trajectory.read_trajectory` reads it, for the built-in rewards and a team's alike), with what the logs lack
added: TRL logs `tools/call_frequency` and `tools/failure_frequency`; this counts, per answer, malformed calls and
tool errors, answers left without one, answers stopped at the turn limit, and calls that ran past the time limit."""

from rewards.trajectory import read_trajectory
from smolalign.tools.resolve import Tools


def tool_grpo_trainer(tools: Tools) -> type:
    from smolalign.trainers.grpo import SharedPromptGRPOTrainer

    class ToolGRPOTrainer(SharedPromptGRPOTrainer):
        _timeouts_logged = 0

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            trajectories = [read_trajectory(completion) for completion in completions]
            count = max(len(trajectories), 1)
            self._log_metric("tools/malformed_calls", sum(t.malformed_calls for t in trajectories) / count)
            self._log_metric("tools/errors_per_answer", sum(t.tool_errors for t in trajectories) / count)
            self._log_metric("tools/unanswered", sum(not t.answered for t in trajectories) / count)
            self._log_metric("tools/max_turns_reached", sum(
                t.pending_call and t.assistant_turns - 1 >= tools.max_turns for t in trajectories) / count)
            timeouts = tools.timeouts
            self._log_metric("tools/timeouts", float(timeouts - self._timeouts_logged))
            self._timeouts_logged = timeouts
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    return ToolGRPOTrainer
