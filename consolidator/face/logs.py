"""Logging setup: a human format by default, one JSON object per line for collectors.

Every record of an event carries a stable `action` key (given in `extra`), so logs can be
filtered by event rather than by message text.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["human", "json"]
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value if isinstance(value, int | float | str | bool) else str(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class HumanFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(message)s", "%H:%M:%S")


class StderrHandler(logging.StreamHandler[Any]):
    """Writes to whatever `sys.stderr` is when a record is emitted, not when the handler was
    made: a caller that swaps stderr (a test runner's capture, closed after the test) would
    otherwise leave the root logger writing to a closed file."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure_logging(*, level: int, fmt: LogFormat) -> None:
    handler = StderrHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else HumanFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    # A library's warning goes through the same handler, so under JSON logs it is JSON too.
    logging.captureWarnings(True)
    # Other libraries log their own workings (a file lock's every acquire, each HTTP
    # request): `--verbose` is about our progress, so theirs shows from warnings up.
    for noisy in THIRD_PARTY_LOGGERS:
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


THIRD_PARTY_LOGGERS = (
    "httpx",
    "httpx2",
    "httpcore",
    "openai",
    "alembic",
    "apscheduler",
    "filelock",
    "sqlalchemy",
    "mcp",
    "asyncio",
    "urllib3",
)
