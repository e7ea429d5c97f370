"""Which of vtx's modules `vtx launch` crosses, from the CLI to the API call.

Starts a local platform (`vtx local up`, its own data dir), then runs `vtx launch TEMPLATE -y`
in this process on a stack file of that platform with the controller off, so that the CLI itself
makes the create call. A profile hook (`sys.setprofile`) records two things:

- the path: the modules of vtx's packages on the call stack when the SDK's
  ``JobServiceClient.create_custom_job`` is entered, outermost first;
- the side trips: every other module of vtx's packages one of whose functions ran during the
  command (planning, pricing, the views, the confirmation).

It reads nothing of vtx's layout but `vtx.cli.app` and `vtx.options.optional_stack`, so the same
file measures an older commit too (copy it there and run it the same way).

    python -m bench.launch_path [--template jobs/templates/smoke-cpu.yaml]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OURS = ("vtx", "jobs", "infra", "trainer")
API_CALL = ("google.cloud.aiplatform_v1.services.job_service.client", "create_custom_job")


def ours(frame: FrameType) -> str | None:
    module = frame.f_globals.get("__name__", "")
    return module if module.split(".")[0] in OURS else None


class Recorder:
    """The profile hook: modules entered, in order, and the stack at the API call."""

    def __init__(self) -> None:
        self.entered: dict[str, None] = {}
        self.path: list[str] | None = None

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = ours(frame)
        if module is not None:
            if frame.f_code.co_name != "<module>":  # a module's import is not a step of the path
                self.entered.setdefault(module)
            return
        called = (frame.f_globals.get("__name__", ""), frame.f_code.co_name)
        if called == API_CALL and self.path is None:
            self.path = stack_modules(frame)


def stack_modules(frame: FrameType | None) -> list[str]:
    """vtx's modules on the stack, outermost first, each once per stretch of the stack."""
    chain: list[str] = []
    while frame is not None:
        module = ours(frame)
        if module is not None and (not chain or chain[-1] != module):
            chain.append(module)
        frame = frame.f_back
    return chain[::-1]


def stack_file(data_dir: Path) -> Path:
    """The running platform's outputs with the controller off, as `--stack-file` reads them."""
    os.environ["VTX_LOCAL_DIR"] = str(data_dir)
    from vtx.options import optional_stack

    outputs = optional_stack("local", None)
    assert outputs is not None
    path = data_dir / "stack-no-controller.json"
    path.write_text(json.dumps({**outputs.model_dump(mode="json"), "controller": False}))
    return path


def launch(template: str, stack: Path) -> Recorder:
    from typer.testing import CliRunner

    from vtx.cli import app  # imported before the hook: the CLI's start is not the path

    recorder = Recorder()
    threading.setprofile(recorder)
    sys.setprofile(recorder)
    try:
        args = ["launch", template, "--stack-file", str(stack), "-y"]
        result = CliRunner().invoke(app, args)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    if result.exit_code != 0:
        raise SystemExit(f"vtx launch exited {result.exit_code}:\n{result.output}")
    return recorder


def report(recorder: Recorder) -> str:
    path = recorder.path or []
    side = [m for m in recorder.entered if m not in path]
    lines = [f"path to the API call: {len(set(path))} modules, {len(path)} stretches of the stack"]
    lines += [f"  {i}. {m}" for i, m in enumerate(path, 1)]
    lines += [f"side trips: {len(side)} more modules ran ({len(recorder.entered)} in all)"]
    lines += [f"  {m}" for m in side]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--template", default="jobs/templates/smoke-cpu.yaml")
    args = parser.parse_args()
    vtx = str(REPO / ".venv" / "bin" / "vtx")
    with tempfile.TemporaryDirectory(prefix="vtx-launch-path-") as tmp:
        env = {**os.environ, "VTX_LOCAL_DIR": tmp}
        subprocess.run([vtx, "local", "up"], env=env, cwd=REPO, check=True, capture_output=True)
        try:
            recorder = launch(args.template, stack_file(Path(tmp)))
        finally:
            subprocess.run([vtx, "local", "down"], env=env, cwd=REPO, check=False)
    print(report(recorder))


if __name__ == "__main__":
    main()
