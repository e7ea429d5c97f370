"""`python -m trainer.serve`: the serving container's command, a contract kept at this name.

trainer/serve.Dockerfile's ENTRYPOINT and the Model's `containerSpec.command` that vtx writes (and
the local platform runs) name this module; the server itself is `trainer.serving.server`.
"""

from __future__ import annotations

import sys

from trainer.serving.server import main

if __name__ == "__main__":
    sys.exit(main())
