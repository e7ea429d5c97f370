"""Entry point Pulumi runs for `pulumi preview --policy-pack infra/policy`: builds the pack only.

The PolicyPack constructor starts the analyzer's gRPC server and blocks, so nothing else (tests,
`vtx review`) may import this module; they use ``infra.policy.policies.POLICIES`` directly."""

import sys
from pathlib import Path

# Pulumi runs this file with infra/policy as its directory; make the repository importable even
# when the virtualenv does not have vtx installed in editable mode.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pulumi_policy import PolicyPack

from infra.policy.policies import POLICIES

PolicyPack(name="vtx-guardrails", policies=POLICIES)
