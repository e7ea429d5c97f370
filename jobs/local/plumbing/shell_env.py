"""What `vtx local env` exports for ``eval``: where a shell's code finds the running platform."""

from __future__ import annotations

import shlex
from pathlib import Path

from jobs.local.platform.state import LOCAL_PROJECT, LOCAL_REGION, PlatformState
from jobs.local.plumbing.tls import tls_files


def shell_environment(state: PlatformState) -> dict[str, str]:
    """The variables: the endpoint for the SDK's default transport
    (``aiplatform.init(api_endpoint=os.environ["VERTEX_API_ENDPOINT"])``; REST's as
    ``VERTEX_REST_ENDPOINT``), the CA gRPC checks the endpoint with (gRPC reads the variable
    itself), the GCS emulator (google-cloud-storage and gcsfs read it), and the project and
    region the SDK reads when ``aiplatform.init`` is not given them."""
    return {
        "VERTEX_API_ENDPOINT": state.grpc_endpoint or state.vertex_endpoint,
        "VERTEX_REST_ENDPOINT": state.vertex_endpoint,
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(tls_files(Path(state.data_dir)).ca),
        "STORAGE_EMULATOR_HOST": state.gcs_endpoint,
        "GOOGLE_CLOUD_PROJECT": LOCAL_PROJECT,
        "GOOGLE_CLOUD_REGION": LOCAL_REGION,
    }


def export_lines(variables: dict[str, str]) -> str:
    """``export NAME=VALUE`` lines, each value quoted for a POSIX shell."""
    return "\n".join(f"export {name}={shlex.quote(value)}" for name, value in variables.items())
