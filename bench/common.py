"""What every benchmark shares: summaries, tables, machine facts and side-by-side ordering.

Benchmarks report; they never pass or fail. Each returns a `Section`: a markdown block with its
exact command, the figures it measured (min/median/max over repetitions, ratios computed from
medians measured in the same run) and a paragraph on what they mean for a user.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import forked_children

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


@dataclass
class Section:
    title: str
    command: str
    body: str
    raw: dict[str, Any] = field(default_factory=dict)

    def markdown(self) -> str:
        return f"## {self.title}\n\n`{self.command}`\n\n{self.body.strip()}\n"


@dataclass(frozen=True)
class Summary:
    values: tuple[float, ...]

    @property
    def min(self) -> float:
        return min(self.values)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def max(self) -> float:
        return max(self.values)

    def cells(self, fmt: str = "{:.3g}") -> list[str]:
        return [fmt.format(self.min), fmt.format(self.median), fmt.format(self.max)]


def summarize(values: Sequence[float]) -> Summary:
    return Summary(tuple(float(v) for v in values))


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def count_of(n: int, noun: str) -> str:
    """`1 repetition`, `3 repetitions`."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def rotated(items: Sequence[Any], rep: int) -> list[Any]:
    """The variants in a different order each repetition, so none always runs first (warm
    caches) or last (a machine that got busier)."""
    shift = rep % len(items)
    return [*items[shift:], *items[:shift]]


def run_json_child(module: str, args: Sequence[str], timeout_s: float = 600.0) -> dict[str, Any]:
    """Run `python -m module args` (a fresh process: its memory and imports are its own) and
    return the JSON object on its last stdout line. Inside `children_forked_after`, the process
    is forked from one that imported the heavy libraries once (bench.forked_children)."""
    zygote = forked_children.current()
    if zygote is not None:
        code, stdout, stderr = zygote.run(module, args, timeout_s)
    else:
        done = subprocess.run(
            [PYTHON, "-m", module, *args],
            cwd=REPO,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    if code != 0:
        raise RuntimeError(f"{module} {' '.join(args)} failed ({code}):\n{stderr[-3000:]}")
    return json.loads(stdout.strip().splitlines()[-1])


def child_env() -> dict[str, str]:
    """A child's environment: ours, string hashes seeded alike, gcsfs off gRPC probes."""
    return dict(os.environ, GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT="false", PYTHONHASHSEED="0")


@contextmanager
def children_forked_after(preload: Sequence[str]) -> Iterator[None]:
    """Within: `run_json_child` forks each child from one process that imported `preload`
    (module names) once, instead of starting it from nothing (bench.forked_children)."""
    with forked_children.forked_children(preload, REPO, child_env()):
        yield


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def machine() -> dict[str, Any]:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem_gb = round(kb / 1e6, 1)
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": mem_gb,
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }


def cpu_time_s() -> float:
    """This process's CPU seconds so far, user + system, all threads: beside wall time, a
    figure that other work on the machine changes less (it still counts threads that spin)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def gemm_flops_per_s(n: int = 4096, reps: int = 5) -> Summary:
    """The machine's dense fp32 matmul rate at torch's thread count: `reps` timed n x n
    products (2 n^3 FLOPs each) after an untimed one. At n = 4096 a product takes about a
    second on 2 cores, long enough that timer and dispatch costs vanish; the ceiling a
    training step's matrix multiplies can approach (CPU "MFU" is measured against it)."""
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    rates = []
    for _ in range(reps):
        start = time.perf_counter()
        torch.mm(a, b)
        rates.append(2 * n**3 / (time.perf_counter() - start))
    return summarize(rates)


@contextmanager
def progress_bar(description: str, total: int) -> Iterator[Callable[[str], None]]:
    """A bar on stderr (stdout carries the report) for benchmarks of many runs; call the
    function it yields after each run, with what ran."""
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)

        def advance(done: str) -> None:
            bar.update(task, advance=1, description=f"{description}: {done}")

        yield advance
