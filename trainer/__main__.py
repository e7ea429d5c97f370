"""`python -m trainer --config CONFIG.yaml [--set key.path=value ...] [--estimate]`: one process.

Inside jobs, `python -m trainer.launch` starts this once per device under torchrun."""

from __future__ import annotations

import sys

from trainer.preemption import StopRequest

if __name__ == "__main__":
    # First thing, before trainer.cli loads torch and transformers (seconds): a SIGTERM during
    # start-up becomes a stop request that the loop sees at its first check, not a death.
    stop = StopRequest().install()

    from trainer.cli import main

    sys.exit(main(stop=stop))
