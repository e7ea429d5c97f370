"""Container entrypoint: `python -m trainer.launch --config CONFIG.yaml [--set k=v ...]`.

Its arguments go to every worker unchanged, a tuning trial's `--KEY=VALUE` parameters (which
Vertex appends to the container's args) among them: see `trainer.config.arguments`.

Turns Vertex's node-level environment into a torchrun invocation (one process per GPU, or one
gloo process on CPU) and runs torchrun's agent in this process, so that its outcome can be
mapped to the exit code the platform should see:

- every worker finished: 0;
- SIGTERM (preemption): the workers checkpoint and exit 143; torchrun's agent, which also gets
  the signal, waits up to `SHUTDOWN_TIMEOUT_S` for them before SIGKILL. We exit 143 too, as a
  process killed by SIGTERM would; the platform's retry then resumes from the checkpoint.
- a peer node was preempted: our workers stop at the same step (the stop flag is all-reduced)
  and exit 143; torchrun reports that as a child failure, which we map back to 143.
"""

from __future__ import annotations

import logging
import signal
import sys

from trainer.config.env import VertexEnv, tpu_host, tpu_host_message
from trainer.config.secrets import SecretsError, export_secrets
from trainer.tracking.metrics import setup_logging

log = logging.getLogger(__name__)
PREEMPTED_NOTE = (
    "every worker checkpointed and exited 143 on SIGTERM (a preemption or a cancel): torch "
    "elastic's 'failed (exitcode: 143)' lines above are this expected stop, not a crash"
)

AGENT_LOGGER = "torch.distributed.elastic.agent.server.api"
EXIT_BARRIER_NOTE = (
    "exit barrier: the node that holds torch elastic's store left it first and closed the "
    "store (a known race at the end of a multi-node run); this node's workers had finished, "
    "so nothing was lost"
)

EXIT_PREEMPTED = 143
EXIT_CONFIG = 2  # as `python -m trainer` exits for a config it cannot use
# A Spot VM gets 30 s between SIGTERM and power-off: the agent must not kill its workers sooner.
SHUTDOWN_TIMEOUT_S = 30


def torchrun_argv(env: VertexEnv, nproc_per_node: int, trainer_args: list[str]) -> list[str]:
    return [
        f"--nnodes={env.nnodes}",
        f"--node_rank={env.node_rank}",
        f"--master_addr={env.master_addr}",
        f"--master_port={env.master_port}",
        f"--nproc_per_node={nproc_per_node}",
        "--max_restarts=0",  # restarts come from the platform, which reschedules the node
        f"--shutdown_timeout={SHUTDOWN_TIMEOUT_S}",
        "--module",
        "trainer",
        *trainer_args,
    ]


def devices_per_node() -> int:
    import torch

    return torch.cuda.device_count() or 1


def exit_code_for(exitcodes: list[int]) -> int:
    """143 when every failed worker stopped for a preemption, else the first failure's code."""
    preempted = (EXIT_PREEMPTED, -signal.SIGTERM)
    if exitcodes and all(code in preempted for code in exitcodes):
        return EXIT_PREEMPTED
    # A worker killed by another signal reports it negated; the platform wants a positive code.
    return next((code for code in exitcodes if code > 0 and code not in preempted), 1)


class ExitBarrierRace(logging.Filter):
    """Turns torch elastic's traceback for the exit-barrier race into one line.

    At the end of a run every node's agent meets at an exit barrier kept in the store of node 0's
    agent. When node 0 arrives last it sets the barrier's key and exits at once, closing the
    store while the others still wait for the reply: their agents log "Error waiting on exit
    barrier" with a DistNetworkError traceback, after their own workers finished. It changes no
    outcome, but in a job's logs it reads like a crash (and formatting it imports torch._dynamo,
    long enough for the platform's SIGTERM to land inside the logging call and add a second
    traceback). Other exit-barrier errors, a timeout among them, keep their traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if record.getMessage().startswith("Error waiting on exit barrier") and _store_closed(error):
            record.msg, record.args, record.exc_info, record.exc_text = (
                EXIT_BARRIER_NOTE,
                (),
                None,
                None,
            )
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def _store_closed(error: BaseException | None) -> bool:
    from torch.distributed import DistNetworkError

    return isinstance(error, DistNetworkError)


def main(argv: list[str] | None = None) -> int:
    trainer_args = sys.argv[1:] if argv is None else argv
    env = VertexEnv.from_environ()
    setup_logging(env.node_rank)
    on_tpu = tpu_host()
    if on_tpu is not None:  # before torchrun: it would start a CUDA process per device
        log.error("%s", tpu_host_message(on_tpu))
        return EXIT_CONFIG
    try:
        export_secrets()  # children inherit the values; VTX_SECRETS goes so they do not refetch
    except SecretsError as exc:  # its message holds no value: logging it is safe
        log.error("secrets not exported: %s", exc)
        return EXIT_CONFIG
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    logging.getLogger(AGENT_LOGGER).addFilter(ExitBarrierRace())
    argv_ = torchrun_argv(env, devices_per_node(), trainer_args)
    log.info(
        "launching torchrun",
        extra={"node_rank": env.node_rank, "nnodes": env.nnodes, "torchrun_args": argv_},
    )
    try:
        run(parse_args(argv_))
    except ChildFailedError as exc:
        code = exit_code_for([f.exitcode for f in exc.failures.values()])
        if code == EXIT_PREEMPTED:
            log.warning("workers stopped", extra={"exit_code": code, "note": PREEMPTED_NOTE})
        else:
            log.error("workers stopped", extra={"exit_code": code})
        return code
    except SignalException as exc:
        log.warning("terminated by %s; workers were given time to checkpoint", exc.sigval.name)
        return EXIT_PREEMPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
