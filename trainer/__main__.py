"""`python -m trainer --config CONFIG.yaml [--set key.path=value ...] [--estimate]`: one process.

Inside jobs, `python -m trainer.launch` starts this once per device under torchrun."""

from __future__ import annotations

import sys

from trainer.cli import main

if __name__ == "__main__":
    sys.exit(main())
