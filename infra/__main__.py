"""The vtx Pulumi program: validated config → Platform → the ``platform`` stack output.

Pulumi runs this file with ``infra/`` as the working directory (``main: infra/`` in Pulumi.yaml);
the ``infra`` package itself is importable because the project is installed in ``.venv``.
"""

import pulumi

from infra.components.vertex_platform import Platform
from infra.config import ConfigError, load_stack_config

gcp_config, vtx_config = pulumi.Config("gcp"), pulumi.Config("vtx")
values = {
    "gcp:project": gcp_config.get("project"),
    "gcp:region": gcp_config.get("region"),
    "vtx:platform": vtx_config.get_object("platform"),
}
try:
    # Validate everything before declaring anything.
    stack_config = load_stack_config(
        {k: v for k, v in values.items() if v is not None}, f"Pulumi.{pulumi.get_stack()}.yaml"
    )
except ConfigError as exc:
    raise pulumi.RunError(str(exc)) from None

platform = Platform("vtx", stack_config)
pulumi.export("platform", platform.outputs)
