"""Any project id is served: names carry the project's number, replicas see it as
CLOUD_ML_PROJECT_ID, and each project lists only its own jobs."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from google.api_core import exceptions

from jobs.core.stack import StackOutputs
from jobs.local.platform.state import LOCAL_PROJECT_NUMBER, numbered_name, project_number
from tests.jobs.local.local_helpers import (
    PARENT,
    client,
    custom_job,
    pool,
    replica_output,
    wait_terminal,
)

USER_PROJECT = "acme-ml-dev"


def test_a_project_id_gets_a_stable_twelve_digit_number() -> None:
    number = project_number(USER_PROJECT)
    assert number is not None and len(number) == 12 and number[0] != "0"
    assert project_number(USER_PROJECT) == number
    assert project_number("acme-ml-prod") != number
    assert project_number("vtx-local") == LOCAL_PROJECT_NUMBER
    assert project_number(number) == number  # a number is its own project


def test_a_name_in_a_body_is_written_with_its_projects_number() -> None:
    number = project_number(USER_PROJECT)
    model = "locations/us-central1/models/m@2"
    assert numbered_name(f"projects/{USER_PROJECT}/{model}") == f"projects/{number}/{model}"
    assert numbered_name(f"projects/{number}/{model}") == f"projects/{number}/{model}"
    for kept in ("projects/Not_A_Project/x", "m1", "", "projects", "gs://b/projects/acme-ml-dev"):
        assert numbered_name(kept) == kept


@pytest.mark.parametrize("bad", ["Acme", "acme_ml", "abc", "acme-", "9acme-ml", "0123"])
def test_what_is_neither_a_project_id_nor_a_number_is_refused(bad: str) -> None:
    assert project_number(bad) is None


def test_a_user_project_runs_jobs_under_its_number(local_platform: StackOutputs) -> None:
    jobs = client(local_platform.vertex_endpoint)
    number = project_number(USER_PROJECT)
    parent = f"projects/{USER_PROJECT}/locations/us-central1"
    job = jobs.create_custom_job(
        parent=parent,
        custom_job=custom_job(
            "acme", pool("import os; print('project', os.environ['CLOUD_ML_PROJECT_ID'])")
        ),
    )
    assert job.name.startswith(f"projects/{number}/locations/us-central1/customJobs/")
    done = wait_terminal(jobs, job.name)
    assert done.state == 4, done.error
    assert replica_output(local_platform, job.name, "workerpool0-0") == [f"project {number}"]

    # The id and the number name the same project; other projects do not see its jobs.
    job_id = job.name.rsplit("/", 1)[-1]
    assert jobs.get_custom_job(name=f"{parent}/customJobs/{job_id}").name == job.name
    listed = {
        j.name for j in jobs.list_custom_jobs(parent=f"projects/{number}/locations/us-central1")
    }
    assert job.name in listed
    assert job.name not in {j.name for j in jobs.list_custom_jobs(parent=PARENT)}
    with pytest.raises(exceptions.NotFound):
        jobs.get_custom_job(name=f"{PARENT}/customJobs/{job_id}")


def test_quota_infos_name_the_asking_project(local_platform: StackOutputs) -> None:
    url = (
        f"{local_platform.vertex_endpoint}/v1/projects/{USER_PROJECT}/locations/global/services/"
        f"aiplatform.googleapis.com/quotaInfos?pageSize=1"
    )
    with urllib.request.urlopen(url) as resp:
        info = json.load(resp)["quotaInfos"][0]
    assert info["name"].startswith(f"projects/{project_number(USER_PROJECT)}/locations/global/")


def test_an_invalid_project_is_a_404(local_platform: StackOutputs) -> None:
    path = "/v1/projects/Not_A_Project/locations/us-central1/customJobs"
    url = f"{local_platform.vertex_endpoint}{path}"
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(url)
    assert caught.value.code == 404
    assert json.load(caught.value)["error"]["status"] == "NOT_FOUND"


def test_endpoint_ids_are_per_project_and_location(local_platform: StackOutputs) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    endpoints = aiplatform_v1.EndpointServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": local_platform.vertex_endpoint},
    )
    parents = [
        PARENT,
        f"projects/{USER_PROJECT}/locations/us-central1",
        "projects/vtx-local/locations/europe-west4",
    ]
    created = [
        endpoints.create_endpoint(
            parent=parent, endpoint={"display_name": f"shared-{i}"}, endpoint_id="shared-id"
        ).result()
        for i, parent in enumerate(parents)
    ]
    assert len({e.name for e in created}) == 3
    assert all(e.name.endswith("/endpoints/shared-id") for e in created)
    with pytest.raises(exceptions.Conflict):
        endpoints.create_endpoint(
            parent=PARENT, endpoint={"display_name": "again"}, endpoint_id="shared-id"
        ).result()
    endpoints.delete_endpoint(name=created[0].name).result()
    for i, endpoint in enumerate(created[1:], start=1):
        assert endpoints.get_endpoint(name=endpoint.name).display_name == f"shared-{i}"
    listed = endpoints.list_endpoints(parent=parents[1])
    assert "shared-1" in {e.display_name for e in listed}
    with pytest.raises(exceptions.NotFound):
        endpoints.get_endpoint(name=created[0].name)


def test_model_ids_are_per_project_and_location(local_platform: StackOutputs) -> None:
    """UploadModelRequest.model_id is unique within its project and location, as Vertex's
    model ids are; the SDK names a parent model by the project's id, which is the same project
    as its number."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    aiplatform.init(
        project=local_platform.project,
        api_endpoint=local_platform.vertex_endpoint,
        api_transport="rest",
        credentials=AnonymousCredentials(),
    )
    pairs = [
        (local_platform.project, "us-central1"),
        (USER_PROJECT, "us-central1"),
        (local_platform.project, "europe-west4"),
    ]

    def upload(project: str, location: str, display_name: str, **extra: str):
        return aiplatform.Model.upload(
            display_name=display_name,
            artifact_uri="gs://vtx-local-models/shared/",
            serving_container_image_uri="us-docker.pkg.dev/acme/vtx/serve:latest",
            project=project,
            location=location,
            **extra,
        )

    created = [
        upload(project, location, f"shared-{i}", model_id="shared-model")
        for i, (project, location) in enumerate(pairs)
    ]
    assert len({m.resource_name for m in created}) == 3
    assert all(m.resource_name.endswith("/models/shared-model") for m in created)
    assert created[1].resource_name.startswith(f"projects/{project_number(USER_PROJECT)}/")
    with pytest.raises(exceptions.Conflict, match="already exists"):
        upload(*pairs[0], "again", model_id="shared-model")
    second = upload(*pairs[1], "shared-1", parent_model="shared-model")
    assert (second.resource_name, second.version_id) == (created[1].resource_name, "2")

    created[0].delete()
    for i, model in enumerate(created[1:], start=1):
        assert aiplatform.Model(model.resource_name).display_name == f"shared-{i}"
    listed = [m.resource_name for m in aiplatform.Model.list(project=USER_PROJECT)]
    assert listed.count(created[1].resource_name) == 1  # its two versions: one model
    with pytest.raises(exceptions.NotFound):
        aiplatform.Model(created[0].resource_name)
