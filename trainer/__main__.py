"""`python -m trainer --config CONFIG.yaml [--set key.path=value ...] [--estimate]`: one process.

Inside jobs, `python -m trainer.launch` starts this once per device under torchrun."""

from __future__ import annotations

import sys

from trainer.config.env import tpu_host, tpu_host_message
from trainer.training.preemption import StopRequest

if __name__ == "__main__":
    # First thing, before trainer.training.cli loads torch and transformers (seconds): a SIGTERM
    # during start-up becomes a stop request that the loop sees at its first check, not a death.
    stop = StopRequest().install()
    on_tpu = tpu_host()
    if on_tpu is not None:  # at once: nothing below has a TPU path
        print(f"error: {tpu_host_message(on_tpu)}", file=sys.stderr)
        sys.exit(2)
    from trainer.tracking.metrics import log_start

    log_start()  # when this start began, for the platform's goodput timeline
    # Then the arguments and the config, without torch: a mistake fails in well under a second.
    from trainer.config.arguments import parse_args, read_config

    args = parse_args()
    cfg = read_config(args)
    if cfg is None:
        sys.exit(2)

    from trainer.training.cli import run

    sys.exit(run(cfg, args, stop))
