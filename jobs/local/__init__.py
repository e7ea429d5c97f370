"""The embedded local platform: a Vertex-compatible control plane, a process executor and a GCS
emulator, all on 127.0.0.1."""
