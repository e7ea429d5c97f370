"""Serving: our container (`python -m trainer.serve`) over HTTP against an in-process
`transformers.pipeline("text-generation")`, same model, prompts and settings, greedy.

Variants (the order rotates every repetition):

- `ours over HTTP: 1 instance`: one POST per prompt to the server's predict route.
- `ours over HTTP: N instances`: the prompts N per POST. The server generates a request's
  instances as padded batches (left padding; up to VTX_SERVE_MAX_BATCH instances, 16 by
  default, and VTX_SERVE_BATCH_TOKENS positions: trainer.serving.env.BatchLimits).
- `ours in-process: 1 prompt`: `trainer.serving.served_model.ServedModel.generate`, what the server
  runs for a request of one instance, called in this process: the difference to the HTTP variant is
  the transport.
- `pipeline: 1 prompt`: `pipe(prompt, ...)` per prompt, in this process.
- `pipeline: N prompts`: `pipe(prompts, ...)` with the pipeline's default batch_size 1:
  generated one after another.
- `pipeline: N prompts, batch_size N`: the same call generating the N prompts as one padded
  batch (left padding): the same work as `ours over HTTP: N instances`.

Model: trainer/examples/tiny.yaml's Llama (2 layers, hidden 64), random init (seed 42), saved
with the shipped tokenizer by save_pretrained into a temporary directory: nothing is
downloaded. Its generation config has no EOS token, so every instance generates exactly
max_new_tokens (a random model would otherwise stop wherever it happens to pick EOS). That is
checked, not assumed: a direct `model.generate` per prompt must return max_new_tokens new
tokens, and every timed answer of our variants and of the unbatched pipeline ones must equal
that reference text (greedy decoding is deterministic, and the server's padded batches change no
greedy token in fp32: tests/trainer/serving/test_serve.py), so the tokens counted are the tokens
generated. The pipeline's padded batch shares the model files and so the missing EOS; its texts
are not checked, its count cannot differ.

Our side is timed as a client sees it: the server runs on 127.0.0.1 with Vertex's variables
(AIP_HTTP_PORT, AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE, AIP_STORAGE_URI), and the clock runs from
sending the request to the parsed JSON answer, over one kept-alive connection (as Vertex's
front end keeps its connections). Each repetition starts a fresh server: its load time runs
from starting the process to the first health 200; its "serving" and "model loaded" log lines
bracket importing transformers and reading the weights (Python, torch and the web stack come
before). The in-process loads, `ServedModel.load` and `pipeline(...)`, are timed where torch and
transformers are already imported. Before timing, each variant makes one untimed call
(first-call set-up is not a steady state). Torch runs one thread on both sides (TORCH_THREADS
says why).

    python -m bench.serving [--reps N] [--prompts N] [--batch N] [--max-new-tokens N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import PYTHON, REPO, Section, rotated, summarize, table
from jobs.local.plumbing.ports import free_port
from trainer.serving.env import HOST_ENV

TINY = REPO / "trainer" / "examples"
HEALTH_ROUTE = "/v1/endpoints/1/deployedModels/2"
PREDICT_ROUTE = f"{HEALTH_ROUTE}:predict"
SEED = 42
TORCH_THREADS = 1
"""On both sides. A second thread gains nothing on a model this small (measured: same median),
and on a shared 2-core machine it turns another process's time slice into a stall of every
operation: runs with 2 threads showed bursts of 20x slower requests on either side."""
LOAD_TIMEOUT_S = 180.0  # the server's imports alone take ~10 s on a busy 2-core machine


@dataclass(frozen=True)
class Variant:
    name: str
    side: str
    """`http` (our server), `in-process` (ServedModel) or `pipeline`."""
    per_request: int
    """Prompts per request (ours) or per pipeline call."""
    batch_size: int = 1
    """The pipeline's batch_size: above 1, the prompts of a call are generated as one batch."""


@dataclass(frozen=True)
class Settings:
    reps: int = 5
    prompts: int = 8
    batch: int = 4
    max_new_tokens: int = 32

    @property
    def command(self) -> str:
        return (
            f"python -m bench.serving --reps {self.reps} --prompts {self.prompts} "
            f"--batch {self.batch} --max-new-tokens {self.max_new_tokens}"
        )


@dataclass
class Samples:
    latency_s: list[float] = field(default_factory=list)
    """Every request's (or pipeline call's) wall time, all repetitions pooled."""
    tokens_per_s: list[float] = field(default_factory=list)
    """One figure per repetition: generated tokens / time of all its requests."""


@dataclass
class Loads:
    """Seconds, one figure per repetition."""

    healthy_s: list[float] = field(default_factory=list)
    """The server: from starting the process to the first health 200."""
    model_s: list[float] = field(default_factory=list)
    """The server: from its "serving" log line to "model loaded"."""
    served_s: list[float] = field(default_factory=list)
    """`ServedModel.load` in this process."""
    pipeline_s: list[float] = field(default_factory=list)
    """`pipeline(...)` in this process."""


def variants(batch: int) -> list[Variant]:
    return [
        Variant("ours over HTTP: 1 instance", "http", per_request=1),
        Variant(f"ours over HTTP: {batch} instances", "http", per_request=batch),
        Variant("ours in-process: 1 prompt", "in-process", per_request=1),
        Variant("pipeline: 1 prompt", "pipeline", per_request=1),
        Variant(f"pipeline: {batch} prompts", "pipeline", per_request=batch),
        Variant(
            f"pipeline: {batch} prompts, batch_size {batch}",
            "pipeline",
            per_request=batch,
            batch_size=batch,
        ),
    ]


# ---------------------------------------------------------------- model and prompts


def model_config() -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load((TINY / "tiny.yaml").read_text())["model"]["config"])


def save_tiny_model(path: Path) -> None:
    """tiny.yaml's Llama, random init, and the shipped tokenizer, as an exported model."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a bar per save and load would bury the report
    options = model_config()
    torch.manual_seed(SEED)
    config = AutoConfig.for_model(options.pop("model_type"), **options)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # No EOS: every instance runs to max_new_tokens, so both sides do the same, known work.
    model.config.eos_token_id = None
    model.generation_config.eos_token_id = None
    model.save_pretrained(str(path))
    AutoTokenizer.from_pretrained(str(TINY / "tokenizer")).save_pretrained(str(path))


def load_prompts(count: int) -> list[str]:
    """The first `count` user messages of the shipped dataset."""
    prompts: list[str] = []
    for line in (TINY / "data" / "tiny.jsonl").read_text().splitlines():
        messages = json.loads(line)["messages"]
        prompts += [m["content"] for m in messages if m["role"] == "user"]
        if len(prompts) >= count:
            return prompts[:count]
    raise ValueError(f"the shipped dataset has fewer than {count} user messages")


def reference(model_dir: Path, prompts: list[str], max_new_tokens: int) -> dict[str, str]:
    """Each prompt's greedy continuation by `model.generate` directly; raises unless each one
    generated max_new_tokens tokens (the count every variant is credited with)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    texts = {}
    for prompt in prompts:
        inputs = tokenizer(prompt, return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(
                **inputs,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
            )
        new = out[0, inputs["input_ids"].shape[1] :]
        if len(new) != max_new_tokens:
            raise RuntimeError(f"{prompt!r}: {len(new)} tokens generated, not {max_new_tokens}")
        texts[prompt] = tokenizer.decode(new, skip_special_tokens=True)
    return texts


# ---------------------------------------------------------------- our server


class Server:
    """`python -m trainer.serve` on 127.0.0.1, its stdout read line by line in a thread so that
    its log records are timed as they arrive."""

    def __init__(self, model_dir: Path) -> None:
        self.port = free_port()
        env = dict(
            os.environ,
            AIP_STORAGE_URI=str(model_dir),
            AIP_HTTP_PORT=str(self.port),
            AIP_HEALTH_ROUTE=HEALTH_ROUTE,
            AIP_PREDICT_ROUTE=PREDICT_ROUTE,
            AIP_MODE="PREDICTION",
            **{HOST_ENV: "127.0.0.1"},  # local clients only, not Vertex's every interface
            PYTHONUNBUFFERED="1",  # log lines arrive when written, for the load-time split
            OMP_NUM_THREADS=str(TORCH_THREADS),  # torch's intra-op threads, as set in-process
        )
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "trainer.serve"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.logged: dict[str, float] = {}
        self.tail: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.conn: http.client.HTTPConnection | None = None

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.perf_counter()
            self.tail = [*self.tail[-30:], line]
            try:
                message = json.loads(line).get("message")
            except (json.JSONDecodeError, AttributeError):
                continue
            self.logged.setdefault(str(message), now)

    def wait_healthy(self) -> float:
        """Seconds from starting the process to the first health 200."""
        url = f"http://127.0.0.1:{self.port}{HEALTH_ROUTE}"
        deadline = self.started + LOAD_TIMEOUT_S
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200:
                        return time.perf_counter() - self.started
            except (urllib.error.URLError, ConnectionError):
                pass  # not listening yet, or 503 while the model loads
            time.sleep(0.02)
        raise RuntimeError(f"the server was not healthy after {LOAD_TIMEOUT_S} s:\n{self.log()}")

    def model_load_s(self) -> float:
        """From the "serving" log line to "model loaded": importing transformers and reading
        the weights."""
        return self.logged["model loaded"] - self.logged["serving"]

    def predict(self, prompts: list[str], max_new_tokens: int) -> list[str]:
        body = {
            "instances": [{"prompt": p} for p in prompts],
            "parameters": {"max_new_tokens": max_new_tokens, "temperature": 0},
        }
        try:
            response = self._post(json.dumps(body))
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # uvicorn closes a connection idle for 5 s (its keep-alive timeout), which the
            # other variants' turns can outlast on a loaded machine: reconnect once, as a
            # client of a real endpoint would.
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            response = self._post(json.dumps(body))
        answer = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"predict answered {response.status}: {answer}")
        return [p["generated_text"] for p in answer["predictions"]]

    def _post(self, body: str) -> http.client.HTTPResponse:
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        self.conn.request("POST", PREDICT_ROUTE, body, {"Content-Type": "application/json"})
        return self.conn.getresponse()

    def stop(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)

    def log(self) -> str:
        return "".join(self.tail)[-3000:]


@contextmanager
def serving(model_dir: Path) -> Iterator[Server]:
    server = Server(model_dir)
    try:
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------- measuring


def build_pipeline(model_dir: Path) -> Any:
    from transformers import pipeline

    pipe = pipeline("text-generation", model=str(model_dir), tokenizer=str(model_dir))
    pipe.tokenizer.padding_side = "left"  # a decoder generates after the prompt's last token
    return pipe


@dataclass(frozen=True)
class Targets:
    """What the variants call, loaded afresh each repetition."""

    server: Server
    served: Any
    """A trainer.serving.served_model.ServedModel."""
    pipe: Any


def load_served(model_dir: Path) -> Any:
    from trainer.serving.served_model import ServedModel

    return ServedModel.load(str(model_dir))


def timed(load: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    loaded = load()
    return loaded, time.perf_counter() - start


def generate(
    variant: Variant, targets: Targets, prompts: list[str], max_new_tokens: int
) -> list[str]:
    if variant.side == "http":
        return targets.server.predict(prompts, max_new_tokens)
    if variant.side == "in-process":
        from trainer.serving.request import GenerationOptions

        options = GenerationOptions(max_new_tokens=max_new_tokens, temperature=0.0)
        return [targets.served.generate(prompt, options) for prompt in prompts]
    pipe = targets.pipe
    options = {"max_new_tokens": max_new_tokens, "do_sample": False, "return_full_text": False}
    if variant.per_request == 1:
        return [pipe(prompts[0], **options)[0]["generated_text"]]
    answers = pipe(prompts, batch_size=variant.batch_size, **options)
    return [answer[0]["generated_text"] for answer in answers]


def groups(prompts: list[str], size: int) -> list[list[str]]:
    return [prompts[i : i + size] for i in range(0, len(prompts), size)]


def measure(
    variant: Variant,
    targets: Targets,
    expected: dict[str, str],
    max_new_tokens: int,
    samples: Samples,
) -> None:
    """One repetition of `variant` over all the prompts; appends to `samples`."""
    prompts = list(expected)
    generate(variant, targets, prompts[: variant.per_request], max_new_tokens)  # warm-up
    total_s, tokens = 0.0, 0
    for group in groups(prompts, variant.per_request):
        start = time.perf_counter()
        texts = generate(variant, targets, group, max_new_tokens)
        elapsed = time.perf_counter() - start
        if variant.batch_size == 1 and texts != [expected[p] for p in group]:
            raise RuntimeError(f"{variant.name}: the greedy texts differ from model.generate's")
        samples.latency_s.append(elapsed)
        total_s += elapsed
        tokens += max_new_tokens * len(group)  # checked in `reference` and above
    samples.tokens_per_s.append(tokens / total_s)


@dataclass(frozen=True)
class Plan:
    """What every repetition does the same way."""

    variants: list[Variant]
    model_dir: Path
    expected: dict[str, str]
    """Each prompt's reference text (see `reference`)."""
    max_new_tokens: int


def run(reps: int = 5, prompts: int = 8, batch: int = 4, max_new_tokens: int = 32) -> Section:
    """Every variant over the same prompts in each of `reps` repetitions, with a fresh server,
    ServedModel and pipeline each time."""
    import torch

    names = variants(batch)
    samples = {v.name: Samples() for v in names}
    loads = Loads()
    threads = torch.get_num_threads()
    torch.set_num_threads(TORCH_THREADS)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            model_dir = Path(tmp) / "model"
            save_tiny_model(model_dir)
            expected = reference(model_dir, load_prompts(prompts), max_new_tokens)
            plan = Plan(names, model_dir, expected, max_new_tokens)
            for rep in range(reps):
                with serving(model_dir) as server:
                    repetition(rep, plan, server, samples, loads)
    finally:
        torch.set_num_threads(threads)  # `python -m bench` runs other benchmarks after this
    return report(names, samples, loads, Settings(reps, prompts, batch, max_new_tokens))


def repetition(
    rep: int, plan: Plan, server: Server, samples: dict[str, Samples], loads: Loads
) -> None:
    """Load everything afresh (timed), then every variant once, in this repetition's order."""
    loads.healthy_s.append(server.wait_healthy())
    loads.model_s.append(server.model_load_s())
    # The server is idle from here on: nothing competes with these loads.
    served, seconds = timed(lambda: load_served(plan.model_dir))
    loads.served_s.append(seconds)
    pipe, seconds = timed(lambda: build_pipeline(plan.model_dir))
    loads.pipeline_s.append(seconds)
    targets = Targets(server, served, pipe)
    for variant in rotated(plan.variants, rep):
        measure(variant, targets, plan.expected, plan.max_new_tokens, samples[variant.name])


# ---------------------------------------------------------------- report


def p90(values: list[float]) -> str:
    """The 90th percentile in ms, when there are enough samples for it to mean something."""
    if len(values) < 10:
        return "-"
    return f"{statistics.quantiles(values, n=10)[8] * 1e3:.1f}"


def latency_rows(names: list[Variant], samples: dict[str, Samples]) -> list[list[str]]:
    rows = []
    for v in names:
        s = samples[v.name]
        lat = summarize([x * 1e3 for x in s.latency_s])
        tps = summarize(s.tokens_per_s)
        rows.append(
            [
                f"`{v.name}`",
                str(len(s.latency_s)),
                *lat.cells("{:.1f}")[:2],
                p90(s.latency_s),
                lat.cells("{:.1f}")[2],
                *tps.cells("{:.0f}"),
            ]
        )
    return rows


def ratio_rows(names: list[Variant], samples: dict[str, Samples]) -> list[list[str]]:
    """Ours against the pipeline doing the same work, and against the batched pipeline."""
    http_1, http_n, served_1, pipe_1, pipe_n, pipe_b = names
    rows = []
    for ours, pipe in [(http_1, pipe_1), (served_1, pipe_1), (http_n, pipe_n), (http_n, pipe_b)]:
        a, b = samples[ours.name], samples[pipe.name]
        lat_a, lat_b = statistics.median(a.latency_s), statistics.median(b.latency_s)
        tps_a, tps_b = statistics.median(a.tokens_per_s), statistics.median(b.tokens_per_s)
        rows.append(
            [
                f"`{ours.name}` / `{pipe.name}`",
                f"{(lat_a - lat_b) * 1e3:+.1f}",
                f"{lat_a / lat_b:.2f}",
                f"{tps_a / tps_b:.2f}",
            ]
        )
    return rows


def report(
    names: list[Variant],
    samples: dict[str, Samples],
    loads: Loads,
    settings: Settings,
) -> Section:
    load_rows = [
        [label, *summarize(values).cells("{:.2f}")]
        for label, values in [
            ("ours: process start -> first health 200", loads.healthy_s),
            ('ours: of which "serving" -> "model loaded" log lines', loads.model_s),
            ("`ServedModel.load` in this process (imports done)", loads.served_s),
            ("`pipeline(...)` in this process (imports done)", loads.pipeline_s),
        ]
    ]
    latency_header = ["variant", "requests", "min ms", "median ms", "p90 ms", "max ms"]
    latency_header += ["tokens/s min", "tokens/s median", "tokens/s max"]
    body = "\n\n".join(
        [
            f"{settings.reps} repetitions, variants alternated; {settings.prompts} prompts (the "
            f"shipped dataset's first user messages), {settings.max_new_tokens} new tokens each, "
            "greedy; tiny.yaml's Llama, random init, no EOS (every instance generates "
            "max_new_tokens, checked). Latency per request or call, all repetitions pooled "
            "(p90 from 10 samples up); tokens/s: generated tokens over the time of all of a "
            "repetition's requests, one figure per repetition.",
            table(latency_header, latency_rows(names, samples)),
            table(
                ["medians compared", "latency difference ms", "latency ratio", "tokens/s ratio"],
                ratio_rows(names, samples),
            ),
            "Load time, once per repetition (a fresh server each), seconds:",
            table(["load", "min s", "median s", "max s"], load_rows),
            meaning(names, samples, loads, settings.max_new_tokens),
        ]
    )
    raw = {
        "latency_s": {k: v.latency_s for k, v in samples.items()},
        "tokens_per_s": {k: v.tokens_per_s for k, v in samples.items()},
        "loads_s": vars(loads),
    }
    title = "Serving: our container over HTTP vs transformers.pipeline"
    return Section(title, settings.command, body, raw)


def meaning(
    names: list[Variant], samples: dict[str, Samples], loads: Loads, max_new_tokens: int
) -> str:
    http_1, http_n, served_1, pipe_1, pipe_n, pipe_b = (samples[v.name] for v in names)
    batch = names[1].per_request
    med = statistics.median
    transport_ms = (med(http_1.latency_s) - med(served_1.latency_s)) * 1e3
    code_ms = (med(served_1.latency_s) - med(pipe_1.latency_s)) * 1e3
    token_ms = med(served_1.latency_s) * 1e3 / max_new_tokens
    start_up = med(loads.healthy_s)
    imports_share = 1 - med(loads.served_s) / start_up
    http_gain = med(http_n.tokens_per_s) / med(http_1.tokens_per_s)
    batch_gain = med(pipe_b.tokens_per_s) / med(pipe_n.tokens_per_s)
    against_pipeline = med(http_n.tokens_per_s) / med(pipe_b.tokens_per_s)
    return (
        f"What it means: one instance over HTTP takes {med(http_1.latency_s) * 1e3:.1f} ms "
        f"against {med(pipe_1.latency_s) * 1e3:.1f} ms for the pipeline in-process. Split "
        "by the same `ServedModel.generate` called in-process: the transport (loopback HTTP, "
        "JSON both ways, the request checks, the hop from uvicorn's event loop to a worker "
        f"thread and back) accounts for {transport_ms:+.1f} ms, our generation code against "
        f"the pipeline's (both call `model.generate` greedily) for {code_ms:+.1f} ms. "
        f"{noise(samples)} The transport costs per request, not per token: it is a "
        f"visible share here because this model takes about {token_ms:.1f} ms a token; for a "
        "real model's hundreds of milliseconds to seconds per request it would be a small one. "
        f"{batch} instances per request give {http_gain:.2f}x the tokens/s of one per "
        "request: the server generates a request's instances as one padded batch, so each "
        "decoding step's fixed cost is shared by the batch, as in the pipeline with batch_size "
        f"{batch} ({batch_gain:.2f}x the tokens/s of the same call one prompt at a time); "
        f"over HTTP, ours gets {against_pipeline:.2f}x the batched pipeline's tokens/s. "
        f"Start-up: {start_up:.1f} s from starting the server to its first "
        f"health 200, against {med(loads.served_s):.2f} s for the same `ServedModel.load` in "
        "a process that has already imported torch and transformers: "
        f"{imports_share:.0%} of it is starting Python and importing them. A replica pays it "
        "once, while Vertex's start-up probes wait (the server listens before loading), never "
        "per request."
    )


def noise(samples: dict[str, Samples]) -> str:
    """How far apart one variant's repetitions were: the scale below which a difference
    between variants means nothing in this run."""
    spread = max(max(s.tokens_per_s) / min(s.tokens_per_s) for s in samples.values())
    return (
        f"One variant's tokens/s varied by up to {spread:.2f}x between repetitions in this "
        "run: differences well inside that are noise."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    a = parser.parse_args()
    print(run(a.reps, a.prompts, a.batch, a.max_new_tokens).markdown())


if __name__ == "__main__":
    main()
