"""Vertex AI v1's gRPC methods as the installed SDK defines them, each with its HTTP rule.

Where each fact is read, and why not from a service descriptor: google-cloud-aiplatform ships its
messages as proto-plus types, whose file descriptors hold messages only; no installed descriptor
pool holds its services or their ``google.api.http`` options. The SDK's generated transports hold
both, one per service: its gRPC transport builds a stub per method (the full method name, the
request's serializer, the response's deserializer, unary or streaming), and its REST transport
holds each method's ``google.api.http`` rule as the generator copied it from the proto
(``_Base<Method>._get_http_options()``: verb, path template, body field, additional bindings in
order). The stubs are recorded here by running each stub property against a channel that records
what it is asked for, instead of parsing the generated source. The mixins every service carries
(google.longrunning.Operations, google.cloud.location.Locations, google.iam.v1.IAMPolicy) do have
descriptors (googleapis-common-protos, grpc-google-iam-v1): their request types are read there.
Their HTTP rules are Vertex's (operations under each resource, ``.../customJobs/ID/operations/OP``),
the aiplatform REST transport's, not operations.proto's generic ``/v1/{name=operations/**}``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import SimpleNamespace
from typing import Any

import grpc
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.message import Message

SERVICES_PACKAGE = "google.cloud.aiplatform_v1.services"
VERTEX_PACKAGE = "google.cloud.aiplatform.v1."
MIXINS_FROM = "JobService"
"""The service whose transports give the mixins' methods (every service carries the same)."""
SERVED = ("JobService", "PipelineService", "ModelService", "EndpointService", "PredictionService")
"""The services the local platform's routes serve: loaded before the first call."""
UNARY = "unary_unary"
NOT_STUBS = frozenset({"operations_client", "grpc_channel", "kind", "host"})
"""Properties of a gRPC transport that are not a method's stub."""


@dataclass(frozen=True)
class Method:
    """One gRPC method: its full name, how it streams, its messages (plain protobuf classes)
    and its ``google.api.http`` rules (``{"method", "uri", "body"?}``, the first one first)."""

    path: str
    kind: str
    request: type[Message]
    response: type[Message]
    http_rules: tuple[dict[str, str], ...]

    @property
    def name(self) -> str:
        """``google.cloud.aiplatform.v1.JobService.CreateCustomJob``, as errors name it."""
        return self.path.lstrip("/").replace("/", ".")


class _Stub:
    """What the recording channel hands back: the transport only stores it."""


class _RecordingChannel(grpc.Channel):
    """A channel that records each stub a transport asks of it: (kind, serializer,
    deserializer) by full method name. It never connects."""

    def __init__(self) -> None:
        self.stubs: dict[str, tuple[str, Callable[..., Any], Callable[..., Any]]] = {}

    def _record(self, kind: str, method: str, serializer: Any, deserializer: Any) -> _Stub:
        self.stubs[method] = (kind, serializer, deserializer)
        return _Stub()

    def unary_unary(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        **_: Any,
    ) -> Any:
        return self._record(UNARY, method, request_serializer, response_deserializer)

    def unary_stream(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        **_: Any,
    ) -> Any:
        return self._record("unary_stream", method, request_serializer, response_deserializer)

    def stream_unary(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        **_: Any,
    ) -> Any:
        return self._record("stream_unary", method, request_serializer, response_deserializer)

    def stream_stream(
        self,
        method: str,
        request_serializer: Any = None,
        response_deserializer: Any = None,
        **_: Any,
    ) -> Any:
        return self._record("stream_stream", method, request_serializer, response_deserializer)

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        return None

    def unsubscribe(self, callback: Any) -> None:
        return None

    def close(self) -> None:
        return None

    def __enter__(self) -> _RecordingChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _message_class(serializer_or_parser: Any, pool_type: Any = None) -> type[Message]:
    """The plain protobuf class behind a stub's serializer or parser: a proto-plus class's
    ``.pb()``, a protobuf class itself; else the descriptor's (``pool_type``)."""
    owner = getattr(serializer_or_parser, "__self__", None)
    if isinstance(owner, type):
        return owner.pb() if hasattr(owner, "pb") else owner
    if pool_type is None:
        raise LookupError(f"no message class behind {serializer_or_parser!r}")
    return message_factory.GetMessageClass(pool_type)


def _in_pool(path: str) -> Any:
    """A mixin method's descriptor (``/google.longrunning.Operations/GetOperation``), or None."""
    try:
        return descriptor_pool.Default().FindMethodByName(path.lstrip("/").replace("/", "."))
    except KeyError:
        return None


def _service_methods(service_module: str) -> list[Method]:
    """The methods of one service package (``...services.job_service``)."""
    grpc_module = importlib.import_module(f"{service_module}.transports.grpc")
    rest_module = importlib.import_module(f"{service_module}.transports.rest_base")
    transport = next(v for k, v in vars(grpc_module).items() if k.endswith("GrpcTransport"))
    rest_base = next(v for k, v in vars(rest_module).items() if k.endswith("RestTransport"))
    channel = _RecordingChannel()
    recorder = SimpleNamespace(_stubs={}, _logged_channel=channel)
    for attribute, value in vars(transport).items():
        if isinstance(value, property) and attribute not in NOT_STUBS and value.fget:
            value.fget(recorder)
    methods = []
    for path, (kind, serializer, deserializer) in channel.stubs.items():
        # A streaming method's holder has no rules: REST does not serve it.
        holder = getattr(rest_base, f"_Base{path.rsplit('/', 1)[1]}", None)
        rules = tuple(holder._get_http_options()) if hasattr(holder, "_get_http_options") else ()
        described = _in_pool(path)
        request = _message_class(serializer, described and described.input_type)
        response = _message_class(deserializer, described and described.output_type)
        methods.append(Method(path, kind, request, response, rules))
    return methods


def _module_of(service: str) -> str:
    """``JobService`` -> ``google.cloud.aiplatform_v1.services.job_service``."""
    return f"{SERVICES_PACKAGE}.{re.sub(r'(?<!^)(?=[A-Z])', '_', service).lower()}"


@cache
def service_methods(service: str) -> dict[str, Method]:
    """The methods of one aiplatform v1 service (``JobService``), and of the mixins it
    carries, by full method name; empty for a service the SDK does not have. Imported on
    first use: the SDK's 35 services take seconds to import, the platform serves five."""
    try:
        methods = _service_methods(_module_of(service))
    except ModuleNotFoundError:
        return {}
    return {method.path: method for method in methods}


def vertex_method(path: str) -> Method | None:
    """The method a call names (``/google.cloud.aiplatform.v1.JobService/CreateCustomJob``,
    ``/google.longrunning.Operations/GetOperation``), or None when the SDK has no such method."""
    service = path.lstrip("/").split("/", 1)[0]
    if service.startswith(VERTEX_PACKAGE):
        return service_methods(service.removeprefix(VERTEX_PACKAGE)).get(path)
    return service_methods(MIXINS_FROM).get(path)
