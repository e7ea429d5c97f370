"""Benchmark children forked from one process that has imported the heavy libraries once.

`run_json_child` runs each measured part as `python -m module args` in a fresh process, so its
memory, its globals and its torch.compile caches are its own. Importing torch, transformers and the
trainer costs a child about 8 CPU-seconds on a 2-core machine, more than a toy-sized part itself:
bench.trainer.gpu's dry run spends most of its time there, and a lent GPU's minutes go the same
way. Inside `forked_children(preload)`, `run_json_child` sends each child to a zygote process that
imported `preload` once and forks it: the child is still a process of its own, started as
`python -m module args` would start (`runpy`, `sys.argv`, `__main__`), with its stdout and stderr
read back the same way, and it exits when its part is done.

The standard library's forkserver does the same forking but not what a child needs here: it
starts its server with the caller's environment as it stands (children get PYTHONHASHSEED=0 and
the repository as their working directory, like `run_json_child`'s), and its preload list is one
per process, for every user of multiprocessing in it.

    python -m bench.forked_children MODULE...   (the zygote; `forked_children` starts it)
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

READY = "ready"


class Zygote:
    """The parent's handle on a running zygote: one request at a time, a JSON line each way."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.stdin: TextIO = proc.stdin  # type: ignore[assignment]
        self.stdout: TextIO = proc.stdout  # type: ignore[assignment]

    def run(self, module: str, args: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of `python -m module args` as a forked child; a child
        still running after `timeout_s` is killed (SIGALRM) and exits -14."""
        with tempfile.TemporaryDirectory() as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            request = {
                "module": module,
                "args": list(args),
                "stdout": str(out),
                "stderr": str(err),
                "timeout_s": max(1, round(timeout_s)),
            }
            self.stdin.write(json.dumps(request) + "\n")
            self.stdin.flush()
            answer = self.stdout.readline()
            if not answer:
                raise RuntimeError(f"the zygote forking {module} exited ({self.proc.wait()})")
            code = int(json.loads(answer)["returncode"])
            return code, out.read_text(), err.read_text()


_current: list[Zygote] = []


def current() -> Zygote | None:
    """The zygote of the innermost `forked_children`, or None outside one."""
    return _current[-1] if _current else None


@contextmanager
def forked_children(preload: Sequence[str], cwd: Path, env: dict[str, str]) -> Iterator[Zygote]:
    """Within: `run_json_child` forks its children from one zygote that imported `preload`
    (module names) once, started in `cwd` with `env`. Inside another `forked_children`, that
    one's zygote is used. The zygote exits when the block ends."""
    if _current:
        yield _current[-1]
        return
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.forked_children", *preload],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        zygote = Zygote(proc)
        if zygote.stdout.readline().strip() != READY:
            raise RuntimeError(f"the zygote importing {', '.join(preload)} failed ({proc.wait()})")
        _current.append(zygote)
        try:
            yield zygote
        finally:
            _current.pop()
    finally:
        if proc.stdin:
            proc.stdin.close()  # end of requests: the zygote exits
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- the zygote's side


def _child(request: dict[str, Any]) -> int:
    """In the forked child: what `python -m module args` would do, stdout and stderr to the
    request's files; the exit code."""
    with open(os.devnull) as null:
        os.dup2(null.fileno(), 0)  # the requests' pipe is the zygote's alone
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        with open(path, "w") as f:
            os.dup2(f.fileno(), fd)
    signal.alarm(int(request["timeout_s"]))  # SIGALRM's default action ends the child
    sys.argv = [request["module"], *request["args"]]
    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int | None):
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def main(preload: Sequence[str]) -> None:
    import importlib

    for name in preload:
        importlib.import_module(name)
    print(READY, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(request)
            finally:
                os._exit(code)  # never back into the zygote's loop
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)
    os._exit(0)  # end of requests: nothing to tear down that is worth torch's long finalising


if __name__ == "__main__":
    main(sys.argv[1:])
