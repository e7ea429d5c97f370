"""`vtx deploy` onto a private endpoint: where the VPC calls the model."""

from __future__ import annotations

from jobs.serving.deploy import DeployOptions
from tests.jobs.serving.fakes import (
    FakeClient,
    FakeEndpoints,
    FakeModels,
    printed,
)
from tests.jobs.serving.private_stacks import private_stack
from vtx.commands.deploy import deploy_model
from vtx.confirm import Ask


def test_the_deploy_prints_the_access_and_the_peering_predict_uri() -> None:
    stack = private_stack("peering")
    rest = FakeEndpoints(stack)
    client = FakeClient(rest)

    def after_deploy(out):
        models = FakeModels(stack)
        return deploy_model(
            out,
            stack,
            "42",
            DeployOptions(),
            Ask(yes=True),
            endpoints=rest,
            models=models,
            client=client,
        )

    original = client.deploy_model

    def deploy_and_record(request, retry):
        answer = original(request, retry)
        rest.endpoints["8"]["deployedModels"] = [
            {"id": "556", "privateEndpoints": {"predictHttpUri": "http://10.2.0.5/v1/m:predict"}}
        ]
        return answer

    client.deploy_model = deploy_and_record  # type: ignore[method-assign]
    code, out = printed(after_deploy)
    assert code == 0
    assert "access private (VPC peering)" in out
    assert "predict from inside the VPC: POST http://10.2.0.5/v1/m:predict" in out
