"""TRL's trainers as smolalign runs them: subclasses where smolalign replaces a part of TRL's (`preference`: dataset
preparation; `grpo`: one pass over a prompt shared by several answers; `distillation`: the loss's precision), and the
prefill shared by a prompt's answers that they and generation use (`shared_prefill`). This package sits below the
recipe layer, so that the method table names each method's trainer."""
