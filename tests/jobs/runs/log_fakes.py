"""Log entries and fake log sources, for the log tests and the CLI's."""

from __future__ import annotations

PRINTS = (
    "import json; "
    "print(json.dumps({'severity': 'INFO', 'message': 'training', 'rank': 0, 'total_steps': 9})); "
    "print(json.dumps({'severity': 'INFO', 'message': 'train', 'rank': 0, 'step': 3, "
    "'loss': 1.5, 'lr': 0.001, 'tokens_per_s': 2500.0})); "
    "print(json.dumps({'severity': 'WARNING', 'message': 'slow disk', 'rank': 0}))"
)
