"""``readMask`` of the List calls: field mask semantics over the returned resources.

ListCustomJobsRequest.read_mask is "Mask specifying which fields to read": each returned job
carries only the masked paths (``google.protobuf.FieldMask``: a path names a field, a dotted path
a field inside a message; a message field named whole comes whole). The REST form writes the
mask as comma-separated camelCase paths (``displayName,jobSpec.workerPoolSpecs``), which is what
the SDK's REST transport sends; snake_case paths are accepted too. A path the message does not
have is a 400, as protobuf's own check decides.
"""

from __future__ import annotations

import re
from typing import Any


class ReadMaskError(ValueError):
    """A mask naming a field the resource does not have."""


def apply_read_mask(message_type: Any, resource: dict, mask: str) -> dict:
    """``resource`` (REST form) cut down to the paths of ``mask``; the whole resource when the
    mask is empty. ``message_type`` is the proto-plus class (CustomJob, ...)."""
    if not mask.strip():
        return resource
    from google.protobuf import field_mask_pb2, json_format

    paths = [_snake(p.strip()) for p in mask.split(",") if p.strip()]
    field_mask = field_mask_pb2.FieldMask(paths=paths)
    source = message_type.pb(message_type())
    if not field_mask.IsValidForDescriptor(source.DESCRIPTOR):
        raise ReadMaskError(
            f"invalid readMask {mask!r}: {source.DESCRIPTOR.name} has no field "
            f"{', '.join(p for p in field_mask.paths if not _valid(p, source))}"
        )
    json_format.ParseDict(resource, source)
    masked = message_type.pb(message_type())
    field_mask.MergeMessage(source, masked)
    return json_format.MessageToDict(masked)


def _snake(path: str) -> str:
    """camelCase (the JSON form) to the proto's snake_case; snake_case stays as it is."""
    return re.sub(r"[A-Z]", lambda m: "_" + m[0].lower(), path)


def _valid(path: str, message: Any) -> bool:
    from google.protobuf import field_mask_pb2

    return field_mask_pb2.FieldMask(paths=[path]).IsValidForDescriptor(message.DESCRIPTOR)
