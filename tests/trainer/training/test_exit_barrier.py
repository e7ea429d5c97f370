"""torch elastic's exit-barrier race reads as one line in a job's log, not a crash's traceback;
other exit-barrier errors keep theirs."""

from __future__ import annotations

import logging

import pytest
from torch.distributed import DistNetworkError, DistStoreError

from trainer.launch import AGENT_LOGGER, EXIT_BARRIER_NOTE, ExitBarrierRace


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def agent_log():
    logger = logging.getLogger(AGENT_LOGGER)
    handler, race = Records(), ExitBarrierRace()
    logger.addHandler(handler)
    logger.addFilter(race)
    yield logger, handler.records
    logger.removeHandler(handler)
    logger.removeFilter(race)


def _log_barrier_error(logger: logging.Logger, error: Exception) -> None:
    try:
        raise error
    except Exception:  # as torch's agent logs it, in SimpleElasticAgent._exit_barrier
        logger.exception("Error waiting on exit barrier. Elapsed: %s seconds", 0.01)


def test_the_closed_store_race_becomes_one_info_line(agent_log) -> None:
    logger, records = agent_log
    _log_barrier_error(logger, DistNetworkError("Failed to recv, got 0 bytes."))
    (record,) = records
    assert record.levelno == logging.INFO
    assert record.getMessage() == EXIT_BARRIER_NOTE
    assert record.exc_info is None
    assert "Traceback" not in logging.Formatter().format(record)


def test_a_barrier_timeout_keeps_its_traceback(agent_log) -> None:
    logger, records = agent_log
    _log_barrier_error(logger, DistStoreError("Timed out after 300 seconds"))
    (record,) = records
    assert record.levelno == logging.ERROR
    assert "Traceback" in logging.Formatter().format(record)


def test_other_agent_lines_pass_untouched(agent_log) -> None:
    logger, records = agent_log
    logger.warning("Received %s death signal, shutting down workers", "SIGTERM")
    assert records[0].getMessage() == "Received SIGTERM death signal, shutting down workers"
