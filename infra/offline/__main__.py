"""`python -m infra.offline STACK [--config FILE] [--json]`: the offline preview of a stack."""

import sys

from infra.offline.program import main

sys.exit(main())
