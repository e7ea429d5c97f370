"""The controller as a process: a pass over the stack's live runs every ``--interval`` seconds,
until SIGTERM. The local platform runs it beside its control plane and GCS emulator (the
stand-in for a scheduler calling the stack's controller every minute); the stack is given whole
as JSON (`jobs.core.stack.StackOutputs`). One pass's failure is logged and the next pass tries
again: a controller that stops on an error stops every run's walk with it."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from types import FrameType

from jobs.control.driver import Driver
from jobs.control.records import RecordError
from jobs.core.stack import StackOutputs
from jobs.vertex.errors import VertexError

log = logging.getLogger("jobs.control")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.control")
    parser.add_argument("--stack-json", required=True, help="the stack's outputs, as JSON")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between passes")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stack = StackOutputs.model_validate_json(args.stack_json)
    stop = threading.Event()

    def stopping(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, stopping)
    signal.signal(signal.SIGINT, stopping)
    driver = Driver(stack)
    log.info("controller up: a pass every %.1f s over %s", args.interval, stack.project)
    while not stop.is_set():
        try:
            report = driver.run_pass()
        except (VertexError, RecordError, OSError) as exc:
            log.warning("pass failed, trying again in %.1f s: %s", args.interval, exc)
        except Exception:
            log.exception("pass failed, trying again in %.1f s", args.interval)
        else:
            for run_id, said in report.actions.items():
                for line in said:
                    log.info("%s: %s", run_id, line)
        stop.wait(args.interval)
    log.info("controller stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
