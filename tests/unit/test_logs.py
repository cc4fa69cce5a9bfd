"""The log handler follows stderr: a swapped-out stream that was closed is never written to."""

from __future__ import annotations

import io
import json
import logging
import sys
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
