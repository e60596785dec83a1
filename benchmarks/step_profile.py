"""Where a training step's time goes, measured inside the benchmark run whose rate it explains: torch's profiler over
a few steps of any transformers Trainer (smolalign's and plain TRL's alike, so both sides of a comparison are profiled
the same way), summed into the figures that tell a host-bound step from a device-bound one.

A benchmark child turns it on with two environment variables, before its trainer is built:

    BENCH_PROFILE=FILE            the tables go to FILE; the summary is printed as one `PROFILE {json}` line
    BENCH_PROFILE_STEPS=2-3       the optimizer steps profiled (1-based, inclusive; default 2-3)

and `import step_profile; step_profile.install_from_environment()` (gpu_sft's children do). The summary: wall seconds
a step over the profiled steps (the device synchronised at both ends), the device's busy seconds a step (the sum of its
kernels' times, as torch's own table totals them), the host's synchronisations a step (`.item()` and the CUDA runtime's
waits), and the kernels and host operations that take the most time. Profiled steps run slower than the others: a
benchmark measures its rate over steps after them (its warm-up), and the tables are written at the end of the last
profiled step, before that step's log line, so the time spent writing them falls outside the measured span. A profile
that fails (no CUPTI, a table that cannot be written) is said on standard error and the run trains on: its rate is
what a lease is spent on.
"""

import json
import os
import sys
import time
from pathlib import Path

PROFILE_VARIABLE, STEPS_VARIABLE = "BENCH_PROFILE", "BENCH_PROFILE_STEPS"
"""The environment variables that turn the profile on (its tables' file) and name its steps."""
PROFILE = "PROFILE "
"""The start of the summary line a profiled child prints."""
PROFILE_FAILED = "step profile failed, the run goes on: "
SYNC_OPS = ("aten::_local_scalar_dense", "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
"""Host operations that wait for the device: `.item()` and friends, and the CUDA runtime's explicit waits."""
TOP = 25
"""Rows in each table of the profile file."""


def parse_steps(text: str) -> tuple[int, int]:
    """'2-3' -> (2, 3); '4' -> (4, 4): the first and last optimizer step profiled, 1-based."""
    first, _, last = text.partition("-")
    first, last = int(first), int(last or first)
    if not 1 <= first <= last:
        raise ValueError(f"BENCH_PROFILE_STEPS={text!r}: expected FIRST-LAST with 1 <= FIRST <= LAST")
    return first, last


def _on_device(event) -> bool:
    from torch.autograd import DeviceType

    return event.device_type != DeviceType.CPU and not getattr(event, "is_user_annotation", False)


def summarize(averages, wall_seconds: float, steps: int) -> tuple[dict, str]:
    """The summary and the tables of a profile's `key_averages()` over `steps` steps taking `wall_seconds`."""
    device = sorted((e for e in averages if _on_device(e)), key=lambda e: e.self_device_time_total, reverse=True)
    host = sorted((e for e in averages if not _on_device(e)), key=lambda e: e.self_cpu_time_total, reverse=True)
    busy = sum(e.self_device_time_total for e in device) / 1e6
    syncs = {e.key: e.count for e in host if e.key in SYNC_OPS}
    summary = {
        "steps": steps,
        "wall_s_per_step": wall_seconds / steps,
        "device_busy_s_per_step": busy / steps if device else None,
        "device_busy_share": busy / wall_seconds if device and wall_seconds > 0 else None,
        "host_syncs_per_step": sum(syncs.values()) / steps,
        "syncs": syncs,
        "top_device": [[e.key[:80], e.self_device_time_total / 1e6 / steps] for e in device[:5]],
        "top_host": [[e.key[:80], e.self_cpu_time_total / 1e6 / steps] for e in host[:5]],
    }

    def table(title: str, events, seconds) -> str:
        total = sum(seconds(e) for e in events) or 1.0
        rows = [f"| {e.key[:100].replace('|', '/')} | {e.count / steps:g} | {seconds(e) / steps * 1e3:.3f} | "
                f"{seconds(e) / total:.1%} |" for e in events[:TOP]]
        return "\n".join([f"## {title}", "", "| name | calls a step | ms a step | share |", "|---|---|---|---|",
                          *rows, ""])

    tables = [f"# {steps} profiled steps: {summary['wall_s_per_step']:.3f} s a step wall", "",
              "```json", json.dumps(summary, indent=1), "```", ""]
    if device:
        tables.append(table("Device kernels by their own time", device, lambda e: e.self_device_time_total / 1e6))
    tables.append(table("Host operations by their own time", host, lambda e: e.self_cpu_time_total / 1e6))
    return summary, "\n".join(tables)


def profile_callback(path: Path, first: int, last: int):
    """A TrainerCallback that profiles optimizer steps first..last, writes the tables to `path` and prints the
    summary line."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from transformers import TrainerCallback

    def synchronize() -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    class ProfileSteps(TrainerCallback):
        def __init__(self):
            self.profiler = None
            self.started = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step + 1 == first and self.profiler is None:  # global_step counts the finished steps
                activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
                synchronize()
                try:
                    self.profiler = profile(activities=activities)
                    self.profiler.start()
                except Exception as failure:  # noqa: BLE001 (the run's rate matters more than its profile)
                    self.give_up(failure)
                self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if isinstance(self.profiler, profile) and state.global_step == last:
                synchronize()
                wall = time.perf_counter() - self.started
                try:
                    self.profiler.stop()
                    if state.is_world_process_zero:
                        summary, tables = summarize(self.profiler.key_averages(), wall, last - first + 1)
                        path.write_text(tables)
                        print(PROFILE + json.dumps(summary), flush=True)
                except Exception as failure:  # noqa: BLE001
                    self.give_up(failure)
                self.profiler = None

        def give_up(self, failure: Exception) -> None:
            """A profile that fails leaves the run to train and be measured: the failure is said, not raised."""
            self.profiler = False  # neither None (start again) nor a profiler (stop it)
            print(f"{PROFILE_FAILED}{type(failure).__name__}: {failure}", file=sys.stderr, flush=True)

    return ProfileSteps()


def install(path: Path, first: int, last: int) -> None:
    """Every transformers Trainer built after this carries the profiling callback."""
    import transformers

    original = transformers.Trainer.__init__

    def with_profile(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.add_callback(profile_callback(path, first, last))

    transformers.Trainer.__init__ = with_profile


def install_from_environment() -> None:
    """install() as BENCH_PROFILE and BENCH_PROFILE_STEPS say; nothing without BENCH_PROFILE."""
    if os.environ.get(PROFILE_VARIABLE):
        install(Path(os.environ[PROFILE_VARIABLE]), *parse_steps(os.environ.get(STEPS_VARIABLE, "2-3")))


def tables_file(run_name: str) -> str:
    """The file name a run's profile tables go to: profile-<the run's name, lower case, dashes for spaces>.md."""
    return f"profile-{run_name.replace(' ', '-').lower()}.md"


def environment(tables: Path, steps: str) -> dict:
    """What a benchmark puts in a child's environment to have it profile `steps` ("2-3") into `tables`."""
    return {PROFILE_VARIABLE: str(tables), STEPS_VARIABLE: steps}


def profile_of(output: str) -> dict | None:
    """The summary a profiled child printed (None when it printed none)."""
    line = next((line for line in reversed(output.splitlines()) if line.startswith(PROFILE)), None)
    return json.loads(line[len(PROFILE):]) if line else None
