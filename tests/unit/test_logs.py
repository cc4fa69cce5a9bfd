"""The log handler follows stderr: a swapped-out stream that was closed is never written to."""

from __future__ import annotations

import io
import json
import logging
import sys
import warnings
from collections.abc import Iterator

import pytest

from consolidator.face.logs import configure_logging


@pytest.fixture
def root_handlers() -> Iterator[None]:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = saved
        root.setLevel(level)


@pytest.mark.usefixtures("root_handlers")
def test_logging_after_the_stderr_it_started_with_was_closed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What an in-process CLI run under a test runner leaves behind: stderr was a capture
    stream when logging was configured, and that stream is closed afterwards."""
    real = sys.stderr
    borrowed = io.StringIO()
    sys.stderr = borrowed
    try:
        configure_logging(level=logging.INFO, fmt="json")
        logging.getLogger("consolidator.test").info("while borrowed", extra={"action": "one"})
    finally:
        sys.stderr = real
    assert json.loads(borrowed.getvalue())["action"] == "one"
    borrowed.close()
    logging.getLogger("consolidator.test").warning("later", extra={"action": "two"})
    err = capsys.readouterr().err
    assert "Logging error" not in err
    assert json.loads(err)["action"] == "two"


@pytest.mark.usefixtures("root_handlers")
def test_a_library_warning_is_a_json_line_under_json_logs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logging.captureWarnings(False)  # an earlier configure_logging in this process took them
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        configure_logging(level=logging.INFO, fmt="json")
        try:
            warnings.warn("a library is unhappy", UserWarning, stacklevel=1)
        finally:
            logging.captureWarnings(False)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    record = json.loads(lines[0])
    assert record["level"] == "warning" and "a library is unhappy" in record["message"]


def test_verbose_logging_keeps_other_libraries_at_warnings() -> None:
    import logging

    from consolidator.face.logs import configure_logging

    configure_logging(level=logging.DEBUG, fmt="human")
    try:
        assert logging.getLogger("consolidator").isEnabledFor(logging.DEBUG)
        for library in ("filelock", "sqlalchemy.engine", "httpx"):
            assert not logging.getLogger(library).isEnabledFor(logging.INFO), library
            assert logging.getLogger(library).isEnabledFor(logging.WARNING), library
    finally:
        configure_logging(level=logging.WARNING, fmt="human")
