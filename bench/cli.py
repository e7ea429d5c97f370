"""`vtx --help` and `vtx validate` wall time against importing the Vertex SDK.

The SDK import is what a CLI pays when it imports `google.cloud.aiplatform` at start-up; vtx
imports it only in the commands that talk to Vertex. Each command is a fresh process, the three
alternate within every repetition.

    python -m bench.cli [--reps N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time

from bench.common import PYTHON, REPO, Section, rotated, summarize, table

VTX = str(REPO / ".venv" / "bin" / "vtx")
TEMPLATE = "jobs/templates/smoke-cpu.yaml"
COMMANDS = {
    "vtx --help": [VTX, "--help"],
    f"vtx validate {TEMPLATE}": [VTX, "validate", TEMPLATE],
    'python -c "import google.cloud.aiplatform"': [PYTHON, "-c", "import google.cloud.aiplatform"],
}
BASELINE = 'python -c "import google.cloud.aiplatform"'
# As an installed CLI runs: pip writes the bytecode at install. Where the environment says not to
# write it (PYTHONDONTWRITEBYTECODE), every start would compile jobs/ and vtx/ again, about half
# of `vtx --help`'s time; the untimed first run writes it to the ignored __pycache__/ folders.
ENVIRONMENT = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall_s(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=ENVIRONMENT, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-500:]!r}")
    return elapsed


def run(reps: int = 5) -> Section:
    names = list(COMMANDS)
    for name in names:  # one untimed run each: bytecode written, OS file cache warm
        wall_s(COMMANDS[name])
    samples: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(reps):
        for name in rotated(names, rep):
            samples[name].append(wall_s(COMMANDS[name]))
    stats = {name: summarize(values) for name, values in samples.items()}
    base = stats[BASELINE].median
    rows = [
        [f"`{name}`", *stats[name].cells("{:.2f}"), f"{stats[name].median / base:.2f}"]
        for name in names
    ]
    help_s, validate_s = stats[names[0]].median, stats[names[1]].median
    body = "\n\n".join(
        [
            f"{reps} repetitions, each command a fresh process, alternated; wall seconds.",
            table(["command", "min s", "median s", "max s", "median / SDK import"], rows),
            (
                f"What it means: `vtx --help` answers in {help_s:.2f} s and `vtx validate` "
                f"checks a template in {validate_s:.2f} s, {base / validate_s:.1f}x faster "
                f"than merely importing the Vertex SDK ({base:.2f} s), because vtx imports the "
                "SDK only in the commands that talk to Vertex. Validation is cheap enough for a "
                "pre-commit hook or an editor save hook."
            ),
        ]
    )
    return Section("CLI start-up", f"python -m bench.cli --reps {reps}", body, raw=samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    print(run(parser.parse_args().reps).markdown())


if __name__ == "__main__":
    main()
