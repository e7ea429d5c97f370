"""The local Vertex over gRPC against REST: per-call latency and calls per second of the same
calls through the real aiplatform_v1 clients, one transport after the other.

A fresh local platform (as `vtx local up` starts it; bench/soak.py's) with a capacity model that
holds no L4, so every CustomJob created here waits PENDING and starts no process that would
share the CPU with the calls; one healthy model (soak's stdlib echo server) deployed on an
endpoint. Then, for each call (GetCustomJob, ListCustomJobs of a page of 20, CreateCustomJob,
Predict of one instance), each repetition makes `calls` sequential calls over each transport,
the transports alternating in order. gRPC's calls go through the transcoder into the same app
REST's reach over HTTP, so the difference is the transport's own cost.

    python -m bench.transports [--reps N] [--calls N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import REPO, Section, rotated, summarize, table
from bench.soak import HEALTHY_MODEL, quiet_sdk
from jobs.local.platform.capacity import Capacity
from jobs.local.platform.settings import LocalSettings
from jobs.local.platform.state import LOCAL_PROJECT, LOCAL_REGION, PlatformState
from jobs.local.plumbing.ports import free_port
from jobs.local.plumbing.processes import start_fresh, stop_platform
from jobs.local.plumbing.tls import tls_files

PARENT = f"projects/{LOCAL_PROJECT}/locations/{LOCAL_REGION}"
TRANSPORTS = ("grpc", "rest")
CALLS = ("get", "list", "create", "predict")
NO_L4 = {"regions": {LOCAL_REGION: {"accelerators": {"NVIDIA_L4": {"on_demand": 0}}}}}
LISTED_JOBS = 20


@contextmanager
def platform(data_dir: Path) -> Iterator[PlatformState]:
    settings = LocalSettings(
        data_dir=data_dir,
        cwd=REPO,
        port=free_port(),
        gcs_port=free_port(),
        grace_s=1.0,
        capacity=Capacity.model_validate(NO_L4),
    )
    state = start_fresh(settings)
    try:
        yield state
    finally:
        stop_platform(data_dir)


def clients(state: PlatformState, transport: str) -> tuple[Any, Any]:
    """(JobServiceClient, PredictionServiceClient) over ``transport``, anonymous."""
    import grpc
    from google.api_core import grpc_helpers
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    built = []
    for cls in (aiplatform_v1.JobServiceClient, aiplatform_v1.PredictionServiceClient):
        if transport == "rest":
            built.append(
                cls(
                    transport="rest",
                    credentials=AnonymousCredentials(),
                    client_options={"api_endpoint": state.vertex_endpoint},
                )
            )
            continue
        roots = tls_files(Path(state.data_dir)).ca.read_bytes()
        channel = grpc_helpers.create_channel(
            state.grpc_endpoint,
            credentials=AnonymousCredentials(),
            ssl_credentials=grpc.ssl_channel_credentials(roots),
        )
        built.append(cls(transport=cls.get_transport_class("grpc")(channel=channel)))
    return built[0], built[1]


def waiting_job(name: str) -> dict[str, Any]:
    """A CustomJob that asks for the L4 the capacity model does not have: it waits PENDING."""
    pool = {
        "machine_spec": {
            "machine_type": "g2-standard-4",
            "accelerator_type": "NVIDIA_L4",
            "accelerator_count": 1,
        },
        "replica_count": 1,
        "container_spec": {"image_uri": "local/bench:1", "command": ["python", "-c", "pass"]},
    }
    return {"display_name": name, "job_spec": {"worker_pool_specs": [pool]}}


def deploy_echo(state: PlatformState) -> str:
    """The echo model on an endpoint, through the SDK (over REST: not measured); the
    endpoint's resource name."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    quiet_sdk()
    aiplatform.init(
        project=LOCAL_PROJECT,
        location=LOCAL_REGION,
        api_endpoint=state.vertex_endpoint,
        api_transport="rest",
        credentials=AnonymousCredentials(),
    )
    model = aiplatform.Model.upload(
        display_name="bench-echo",
        artifact_uri="gs://vtx-local-models/bench-echo/",
        serving_container_image_uri="us-docker.pkg.dev/acme/vtx/echo:1",
        serving_container_command=["python", "-c"],
        serving_container_args=[HEALTHY_MODEL],
    )
    return model.deploy(machine_type="n1-standard-4").resource_name


def call_makers(jobs: Any, predictions: Any, job: str, endpoint: str) -> dict[str, Callable]:
    from google.protobuf import struct_pb2

    instance = struct_pb2.Value(string_value="hello")
    return {
        "get": lambda: jobs.get_custom_job(name=job),
        # The pager's first page is fetched by the call itself; the others are never asked for.
        "list": lambda: jobs.list_custom_jobs(request={"parent": PARENT, "page_size": LISTED_JOBS}),
        "create": lambda: jobs.create_custom_job(parent=PARENT, custom_job=waiting_job("bench")),
        "predict": lambda: predictions.predict(endpoint=endpoint, instances=[instance]),
    }


def timed(call: Callable[[], Any], n: int) -> tuple[list[float], float]:
    """Each call's seconds, and the wall time of all ``n``."""
    latencies = []
    start = time.perf_counter()
    for _ in range(n):
        began = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - began)
    return latencies, time.perf_counter() - start


def measure(state: PlatformState, reps: int, calls: int) -> dict[tuple[str, str], dict]:
    endpoint = deploy_echo(state)
    built = {t: clients(state, t) for t in TRANSPORTS}
    jobs = built["rest"][0]
    for i in range(LISTED_JOBS):
        job = jobs.create_custom_job(parent=PARENT, custom_job=waiting_job(f"listed-{i}")).name
    makers = {t: call_makers(*built[t], job, endpoint) for t in TRANSPORTS}
    for transport in TRANSPORTS:  # warm: channels connected, first-call imports done
        for make in makers[transport].values():
            make()
    samples: dict[tuple[str, str], dict] = {
        (c, t): {"latency": [], "rate": []} for c in CALLS for t in TRANSPORTS
    }
    for rep in range(reps):
        for call in CALLS:
            for transport in rotated(TRANSPORTS, rep):
                latencies, wall = timed(makers[transport][call], calls)
                samples[(call, transport)]["latency"] += latencies
                samples[(call, transport)]["rate"].append(calls / wall)
    return samples


def run(reps: int = 5, calls: int = 40) -> Section:
    with (
        tempfile.TemporaryDirectory(prefix="vtx-transports-") as tmp,
        platform(Path(tmp) / "platform") as state,
    ):
        samples = measure(state, reps, calls)
    rows, ratios = [], {}
    for call in CALLS:
        medians = {}
        for transport in TRANSPORTS:
            latency = sorted(samples[(call, transport)]["latency"])
            rate = summarize(samples[(call, transport)]["rate"])
            medians[transport] = statistics.median(latency)
            p95 = latency[int(0.95 * (len(latency) - 1))]
            rows.append(
                [
                    call,
                    transport,
                    f"{medians[transport] * 1000:.2f}",
                    f"{p95 * 1000:.2f}",
                    *rate.cells("{:.0f}"),
                ]
            )
        ratios[call] = medians["grpc"] / medians["rest"]
        rows[-1].append(f"{ratios[call]:.2f}")
        rows[-2].append("")
    said = ", ".join(f"{call} {ratio:.2f}x" for call, ratio in ratios.items())
    body = "\n\n".join(
        [
            f"{reps} repetitions of {calls} sequential calls per call and transport, the "
            "transports alternating; one client per transport (aiplatform_v1's, anonymous), "
            "gRPC over TLS with the platform's CA. Latency over every call; calls/s per "
            "repetition (min, median, max).",
            table(
                [
                    "call",
                    "transport",
                    "median ms",
                    "p95 ms",
                    "calls/s min",
                    "calls/s median",
                    "calls/s max",
                    "gRPC / REST median latency",
                ],
                rows,
            ),
            (
                f"What it means: gRPC's median latency against REST's, per call: {said}. The "
                "gRPC side adds the transcoding (the message to JSON and the answer back, "
                "protobuf's json_format both ways) and an in-process ASGI call on top of the "
                "same route; REST pays HTTP/1.1 and the SDK's own JSON parsing in the client. "
                "Either way the route's work (the store, the executor's lock for a create, "
                "the model's answer for a predict) is the same."
            ),
        ]
    )
    return Section(
        title="Transports: gRPC vs REST",
        command=f"python -m bench.transports --reps {reps} --calls {calls}",
        body=body,
        raw={f"{c}/{t}": v["rate"] for (c, t), v in samples.items()},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    print(run(args.reps, args.calls).markdown())


if __name__ == "__main__":
    main()
