"""smolalign: post-training for hybrid-reasoning assistants (SFT, preference optimization, on-policy RL)."""

__version__ = "0.1.0"
