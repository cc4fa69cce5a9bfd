"""Every error the package raises on purpose, and the exit code each one ends a command with.

The CLI turns any `ConsolidatorError` that reaches it into one line on stderr and its
`exit_code`: 1 the work failed, 2 bad usage or configuration (a retry would not help until
someone changes something), 3 the database is unreachable.
"""

from __future__ import annotations

# Not `typing`: a pass answered from its certificate loads this module and nothing more.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_DB_UNAVAILABLE = 3


class ConsolidatorError(Exception):
    """The base of the hierarchy. `reported`: the command already printed its own report
    (under `--json`, the JSON document), so the error adds only its line on stderr."""

    exit_code: ClassVar[int] = EXIT_FAILED
    reported: ClassVar[bool] = False


class ConfigError(ConsolidatorError, ValueError):
    """Bad configuration or input: the message says what is wrong and how to fix it."""

    exit_code = EXIT_USAGE


class DatabaseUnavailable(ConsolidatorError, RuntimeError):
    """The database cannot be reached."""

    exit_code = EXIT_DB_UNAVAILABLE


class DatabaseNotMigrated(ConsolidatorError, RuntimeError):
    """The database schema is behind this version of the program."""

    exit_code = EXIT_USAGE


class WorkFailed(ConsolidatorError):
    """The command ran and reported, but its work failed."""

    reported = True
