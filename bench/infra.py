"""Time to evaluate the Pulumi program offline (under mocks), dev and prod, and its growth with
the number of quota and secret entries (10, 100, 1000 of each, added to the dev stack).

This is the engine-independent part of `pulumi preview` / `vtx review`: config validation,
every component's Python, and the registration of each resource with the (mock) engine.
Every evaluation runs in a fresh process (Pulumi's runtime keeps global state per process).

    python -m bench.infra [--reps N] [--sizes 10,100,1000]

Entries: secrets are named `bench-secret-<i>`; quota requests cycle over the catalog's
accelerators, on-demand and Spot, in synthetic regions `us-bench<k>` (a project has ~40 real
regions, so 1000 distinct (accelerator, spot, region) requests need invented ones; the program
treats every region alike, so only the count matters here).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.common import REPO, Section, rotated, run_json_child, summarize, table


def scaled_config(entries: int, directory: Path) -> Path:
    """The dev stack file with `entries` quota requests and `entries` secrets."""
    from infra.config import quota_accelerators, read_stack_file

    values = read_stack_file(REPO / "Pulumi.dev.yaml")
    accelerators = sorted(quota_accelerators())
    kinds = [(a, spot) for a in accelerators for spot in (False, True)]
    platform = values["vtx:platform"]
    platform["quotas"] = [
        {
            "accelerator": kinds[i % len(kinds)][0],
            "spot": kinds[i % len(kinds)][1],
            "count": 8,
            "region": f"us-bench{i // len(kinds)}",
        }
        for i in range(entries)
    ]
    platform["secrets"] = [f"bench-secret-{i}" for i in range(entries)]
    path = directory / f"Pulumi.bench-{entries}.yaml"
    path.write_text(yaml.safe_dump({"config": values}))
    return path


def evaluate(stack: str, config_file: str | None) -> dict[str, float]:
    """Child process: one offline run, timed (imports excluded: they are paid once per CLI)."""
    from infra.offline.program import run_offline

    start = time.perf_counter()
    run = run_offline(stack, Path(config_file) if config_file else None)
    return {"seconds": time.perf_counter() - start, "resources": len(run.resources)}


BIG = 1000  # cases at least this large run once: each takes minutes on a small machine


def run(reps: int = 2, sizes: tuple[int, ...] = (10, 100, 1000)) -> Section:
    with tempfile.TemporaryDirectory() as tmp:
        cases = {"dev": ("dev", None), "prod": ("prod", None)}
        for n in sizes:
            cases[f"dev + {n} quotas + {n} secrets"] = ("bench", str(scaled_config(n, Path(tmp))))
        samples: dict[str, list[float]] = {name: [] for name in cases}
        resources: dict[str, int] = {}
        for rep in range(reps):
            for name in rotated(list(cases), rep):
                if rep > 0 and any(name.startswith(f"dev + {n} ") for n in sizes if n >= BIG):
                    continue
                stack, config = cases[name]
                args = [stack] + ([config] if config else [])
                result = run_json_child("bench.infra", ["--child", *args])
                samples[name].append(result["seconds"])
                resources[name] = int(result["resources"])
    stats = {name: summarize(v) for name, v in samples.items()}
    dev = stats["dev"].median
    rows = [
        [name, resources[name], *stats[name].cells("{:.2f}"), f"{stats[name].median / dev:.2f}"]
        for name in cases
    ]
    largest = f"dev + {sizes[-1]} quotas + {sizes[-1]} secrets"
    marginals = ", ".join(
        f"{n}: {1000 * (stats[c].median - dev) / max(resources[c] - resources['dev'], 1):.0f} ms"
        for n in sizes
        for c in [f"dev + {n} quotas + {n} secrets"]
    )
    added = max(resources[largest] - resources["dev"], 1)
    shape = ""
    if len(sizes) >= 2:
        per = {
            n: (stats[c].median - dev) / max(resources[c] - resources["dev"], 1)
            for n in sizes[-2:]
            for c in [f"dev + {n} quotas + {n} secrets"]
        }
        small, big = (per[n] for n in sizes[-2:])
        if big > 2 * small > 0:
            shape = (
                f"From {sizes[-2]} to {sizes[-1]} entries the cost per resource grew "
                f"{big / small:.0f}x: the growth is super-linear, so very large stacks should "
                "be split or the cause profiled."
            )
    per_resource_ms = 1000 * (stats[largest].median - dev) / added
    body = "\n\n".join(
        [
            f"{reps} repetitions (cases of {BIG}+ entries: 1), each evaluation a fresh process, "
            "cases alternated; seconds from the `run_offline()` call to its return, the first "
            "run in the process (what `vtx review` pays: it includes the lazy import of the "
            "pulumi_gcp modules the program uses, not the interpreter start).",
            table(["stack", "resources", "min s", "median s", "max s", "median / dev"], rows),
            (
                f"What it means: a reviewer gets the offline preview of dev in {dev:.2f} s and "
                f"prod in {stats['prod'].median:.2f} s, without a cloud account. Cost grows "
                f"with the resources declared: with {sizes[-1]} quota requests and "
                f"{sizes[-1]} secrets ({resources[largest]} resources) an evaluation takes "
                f"{stats[largest].median:.2f} s: each resource beyond dev's adds about "
                f"{per_resource_ms:.0f} ms (marginal cost per added resource by size: "
                f"{marginals}; a constant marginal cost would mean linear growth). {shape}"
            ),
        ]
    )
    return Section(
        "Infrastructure evaluation under mocks",
        f"python -m bench.infra --reps {reps} --sizes {','.join(map(str, sizes))}",
        body,
        raw={"seconds": samples, "resources": resources},
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        stack = sys.argv[2]
        config = sys.argv[3] if len(sys.argv) > 3 else None
        print(json.dumps(evaluate(stack, config)))
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--sizes", default="10,100,1000")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    print(run(args.reps, sizes).markdown())


if __name__ == "__main__":
    main()
