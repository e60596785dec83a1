"""Every weight sync into vLLM checked: rollouts come from the policy being trained, or the run stops.

TRL copies the policy's weights into its vLLM engine (colocated) or server before it generates with new weights
(GRPO, GOLD and distillation through `VLLMGeneration.sync_weights`, online DPO through `_move_model_to_vllm`). A copy
that never lands (an adapter that is not merged, parameter names the engine does not map, a transfer that silently
does nothing) leaves the engine generating from an old policy while the trainer goes on; TRL's importance-sampling
correction then hides it. `check_weight_syncs` wraps the trainer's sync (on that trainer only) so that after each one:

- the engine and the policy score the same probe: the end of the first training prompt followed by the engine's
  greedy answer to it (fixed at the first sync), one log-probability per answer token, raw logits on both sides;
- the engine must score like the current policy, within `tolerance` (mean absolute difference per token), and
  differently from the policy it was last shown to hold (the reference). The first sync, made before any update,
  measures the precision gap between the engine and the trainer on the same weights (a bf16 engine against a float32
  trainer: ~0.02-0.05 nats; float32 on both: ~1e-6); the tolerance is twice that gap plus 0.01;
- verdicts: within the tolerance of the current policy and outside it of the reference: verified (the current policy
  becomes the reference); within it of both: the policy has not moved further than the precision can tell since the
  reference, not yet decidable (the reference stays, so movement adds up until it is); within it of the reference
  only: stale; of neither: the engine holds other weights. The last two stop the run (RunFailure, exit 1), naming
  the backend, the step and what to check, before any rollout from the stale engine is trained on. So does a first
  sync whose gap exceeds FIRST_SYNC_LIMIT (the engine loaded another checkpoint or revision than the policy);
- the values go into the next logged entry (metrics.jsonl): sync/engine_gap, sync/reference_gap, sync/policy_moved,
  sync/verified (1 verified, 0 not yet decidable), sync/seconds (TRL's copy) and sync/check_seconds (the check);
- the sync itself runs under the run's watchdog: one that takes longer than generation.sync_timeout fails the run,
  naming the server's log (runs/watchdog.py).

Every process takes part: the policy's forward pass gathers sharded parameters (ZeRO-3), each colocated engine is
checked by its own process and a server by the main process, and every process raises the same verdict.
"""

import time
from dataclasses import dataclass, field

from smolalign.errors import RunFailure
from smolalign.generation.backend_settings import sync_timeout

PROBE_ANSWER_TOKENS = 16
"""Tokens of the engine's greedy answer appended to the probe's prompt: where the policy puts its mass, the part of
the probe training moves most."""
PROBE_PROMPT_TOKENS = 8
"""Tokens of the prompt kept before the answer in the probe. The probe is short because its cost is mostly the
trainer's forward pass, whose per-layer overhead dominates at this length on a CPU (0.2-0.3 s for 8-32 tokens of the
bundled 135M model on 2 cores; the engine 0.14-0.19 s)."""
MAX_PROMPT_TOKENS = 512
"""The engine answers the last this many tokens of the prompt."""
FALLBACK_PROMPT = "Question: what is 17 plus 25? Answer:"
"""The probe's prompt when the training data has no `prompt` column to take one from."""
FIRST_SYNC_LIMIT = 0.25
"""Nats per token: the most the engine and the policy may differ at the first sync, where they hold the same weights
(measured: ~1e-6 both in float32, 0.02-0.05 for a bf16 engine against a float32 trainer). More means the engine
loaded another model than the trainer (another revision, checkpoint or conversion)."""
MEASURED_COST = "1.9% of a step of the CPU quickstart recipe, 0.48 s of 25.9 s"
"""What the check costs, as measured (benchmarks/RESULTS.md, "Checked weight syncs")."""
TOLERANCE_FLOOR = 0.01
"""Nats per token added to twice the first sync's gap: the tolerance on every later sync."""


@dataclass
class SyncCheck:
    """The state of one run's checks: its probe, the policy's log-probs the engine was last shown to match."""

    mode: str
    """TRL's vllm_mode: "colocate" or "server"."""
    probe: tuple[list[int], int] | None = None
    """The probe's tokens and the position its answer starts at: the answer's tokens are the ones scored."""
    reference: object = None
    """The policy's log-probs (a float32 tensor per answer token of the probe) at `reference_step`."""
    reference_step: int | None = None
    tolerance: float | None = None
    logged: dict = field(default_factory=dict)
    """The last check's values, merged into the trainer's next logged entry."""

    def judge(self, step: int, engine, policy) -> dict:
        """The verdict on one sync from the engine's and the policy's log-probs of the probe (float32 tensors):
        its logged values; raises RunFailure when the engine is stale or holds other weights."""
        gap = (engine - policy).abs().mean().item()
        if self.reference is None:  # the first sync: the same weights on both sides
            if gap > FIRST_SYNC_LIMIT:
                raise RunFailure(
                    f"{self.backend} does not hold the weights being trained at step {step}, the first weight sync: "
                    f"its log-probs of the probe differ from the policy's by {gap:.4f} nats per token on average "
                    f"(at most {FIRST_SYNC_LIMIT} for the same weights in another precision). Check that the engine "
                    "loads the same model as the trainer (model.source, model.revision, a converted checkpoint).")
            self.tolerance = 2 * gap + TOLERANCE_FLOOR
            self.reference, self.reference_step = policy, step
            return {"sync/engine_gap": gap, "sync/reference_gap": gap, "sync/policy_moved": 0.0, "sync/verified": 1}
        reference_gap = (engine - self.reference).abs().mean().item()
        moved = (policy - self.reference).abs().mean().item()
        values = {"sync/engine_gap": gap, "sync/reference_gap": reference_gap, "sync/policy_moved": moved}
        if gap <= self.tolerance < reference_gap:
            self.reference, self.reference_step = policy, step
            return {**values, "sync/verified": 1}
        if gap <= self.tolerance:
            return {**values, "sync/verified": 0}
        scores_like = (f"like the policy of step {self.reference_step} ({reference_gap:.4f} nats per token away), "
                       "not the one being trained" if reference_gap <= self.tolerance else
                       f"like neither the policy being trained nor that of step {self.reference_step} "
                       f"({reference_gap:.4f} nats per token away)")
        raise RunFailure(
            f"{self.backend} is stale at step {step}: after the weight sync it scores the probe {scores_like}; its "
            f"log-probs differ from the current policy's by {gap:.4f} nats per token on average (tolerance "
            f"{self.tolerance:.4f}). Rollouts from it would not come from the policy being trained, so the run stops "
            f"before training on them. Check {self._what_to_check()}.")

    @property
    def backend(self) -> str:
        """How messages name the engine."""
        return "the vLLM server" if self.mode == "server" else "the colocated vLLM engine"

    def _what_to_check(self) -> str:
        if self.mode == "server":
            return ("the server's log for weight-update errors, that the server serves the model being trained, and "
                    "the weight-transfer group (its port, stated at the start: generation.server.group_port; "
                    "VLLM_HOST_IP across nodes)")
        return ("that TRL's weight sync reaches the engine: with LoRA, that the adapter merges into the base weights "
                "(peft's merge_adapter); a model whose parameter names vLLM does not map")


def describe_sync_check(generation) -> str | None:
    """The plan's `weight sync` row (None without vLLM)."""
    if generation is None or generation.backend == "transformers":
        return None
    return (f"every sync checked: the engine and the policy score a {PROBE_PROMPT_TOKENS + PROBE_ANSWER_TOKENS}-token "
            f"probe (2 short forward passes; {MEASURED_COST}); a stale engine stops the run; a sync longer than "
            f"{sync_timeout(generation):g} s fails it (generation.sync_timeout)")


def check_weight_syncs(trainer, watchdog) -> SyncCheck | None:
    """Wrap `trainer`'s weight sync into vLLM (nothing when it generates with transformers): the sync timed by
    `watchdog` (runs.watchdog.Watchdog), then checked (see the module docstring). Returns the check's state."""
    target = _sync_target(trainer)
    if target is None:
        return None
    owner, method, mode = target
    check = SyncCheck(mode)
    sync = getattr(owner, method)

    def checked_sync():
        step = trainer.state.global_step
        started = time.monotonic()
        with watchdog.timing_sync(f"the weight sync into {check.backend} at step {step}"):
            sync()
        synced = time.monotonic()
        values = _check_once(check, trainer, owner, step)
        check.logged = {**values, "sync/seconds": synced - started, "sync/check_seconds": time.monotonic() - synced}

    setattr(owner, method, checked_sync)
    log = trainer.log

    def log_with_sync(logs, *args, **kwargs):
        if check.logged and not any(key.startswith("eval_") for key in logs):
            logs.update(check.logged)
            check.logged = {}
        return log(logs, *args, **kwargs)

    trainer.log = log_with_sync
    return check


def _sync_target(trainer):
    """(the object whose method syncs, the method's name, "colocate" or "server"), or None without vLLM."""
    generation = getattr(trainer, "vllm_generation", None)
    if generation is not None:  # GRPO, distillation, GOLD
        return generation, "sync_weights", generation.mode
    if getattr(trainer, "use_vllm", False) and hasattr(trainer, "_move_model_to_vllm"):  # online DPO
        return trainer, "_move_model_to_vllm", trainer.vllm_mode
    return None


def _check_once(check: SyncCheck, trainer, owner, step: int) -> dict:
    from accelerate.utils import broadcast_object_list, gather_object

    accelerator, mode = trainer.accelerator, check.mode
    engine = _engine(owner, mode)
    scores_here = mode == "colocate" or accelerator.is_main_process
    if check.probe is None:
        # Every colocated engine answers (engines split by tensor parallelism generate together); the main
        # process's probe is the one every process keeps.
        probe = [_make_probe(trainer, engine, mode) if scores_here else None]
        if accelerator.num_processes > 1:
            broadcast_object_list(probe)
        check.probe = probe[0]
    policy = _policy_log_probs(trainer, *check.probe)  # every process: ZeRO-3 gathers the weights for it
    engine_scores = _engine_log_probs(engine, mode, *check.probe) if scores_here else None
    outcome = None
    try:
        if engine_scores is not None:
            outcome = check.judge(step, engine_scores, policy)
    except RunFailure as failure:
        outcome = str(failure)
    outcomes = gather_object([outcome]) if accelerator.num_processes > 1 else [outcome]
    failures = [o for o in outcomes if isinstance(o, str)]
    if failures:
        raise RunFailure(failures[0])
    return next(o for o in outcomes if isinstance(o, dict))  # a process without an engine logs the main one's


def _engine(owner, mode: str):
    if mode == "server":
        return owner.vllm_client
    return owner.llm


def _make_probe(trainer, engine, mode: str) -> tuple[list[int], int]:
    """The last PROBE_PROMPT_TOKENS of the first training prompt, then the engine's greedy answer to the whole
    prompt; and where the answer starts."""
    prompt = _prompt_ids(trainer)[-MAX_PROMPT_TOKENS:]
    if mode == "server":
        answer = engine.generate([prompt], n=1, temperature=0.0, max_tokens=PROBE_ANSWER_TOKENS)["completion_ids"][0]
    else:
        from vllm import SamplingParams

        output = engine.generate([{"prompt_token_ids": prompt}],
                                 SamplingParams(max_tokens=PROBE_ANSWER_TOKENS, temperature=0.0), use_tqdm=False)
        answer = output[0].outputs[0].token_ids
    context = list(prompt[-PROBE_PROMPT_TOKENS:])
    return context + list(answer), len(context)


def _prompt_ids(trainer) -> list[int]:
    tokenizer = trainer.processing_class
    tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor's text half
    dataset = trainer.train_dataset
    prompt = dataset[0]["prompt"] if dataset is not None and "prompt" in dataset.column_names else FALLBACK_PROMPT
    if isinstance(prompt, list):  # messages: rendered as the trainer renders them for generation
        kwargs = dict(getattr(trainer.args, "chat_template_kwargs", None) or {})
        prompt = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False, **kwargs)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return ids or tokenizer(FALLBACK_PROMPT, add_special_tokens=False)["input_ids"]


def _policy_log_probs(trainer, probe: list[int], answer_start: int):
    """The policy's log-probability of each answer token of the probe (float32), as the trainer computes: in its
    autocast, without dropout; logits only where the answer's tokens are predicted (the vocabulary projection is a
    good part of a short probe's cost)."""
    import torch

    model = trainer.model
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), trainer.accelerator.autocast():
            ids = torch.tensor([probe], device=trainer.accelerator.device)
            kept = len(probe) - answer_start + 1  # the positions predicting the answer, and the last one
            try:
                logits = model(input_ids=ids, logits_to_keep=kept).logits[0]
            except TypeError:  # a model whose forward does not take logits_to_keep
                logits = model(input_ids=ids).logits[0]
            logits = logits[-kept:-1].float()
    finally:
        model.train(was_training)
    return logits.log_softmax(-1).gather(1, ids[0, answer_start:, None])[:, 0].cpu()


def _engine_log_probs(engine, mode: str, probe: list[int], answer_start: int):
    """The engine's log-probability of each answer token of the probe (its prompt log-probs, temperature 1)."""
    import torch

    if mode == "server":
        scored = engine.get_sequence_logprobs([probe], [answer_start], top_logprobs=0)["actual_logprobs"][0]
        return torch.tensor([entry[0] for entry in scored], dtype=torch.float32)
    from vllm import SamplingParams

    output = engine.generate([{"prompt_token_ids": probe}],
                             SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0), use_tqdm=False)[0]
    return torch.tensor([entry[token].logprob for entry, token in zip(output.prompt_logprobs[answer_start:],
                                                                       probe[answer_start:], strict=True)],
                        dtype=torch.float32)
