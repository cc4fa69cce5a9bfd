"""The agent backends' transport: one run of the agent's own CLI (`codex exec`, `claude -p`)
per attempt, with the user's configuration and login, answering the pipeline's prompt against
its JSON schema.

The prompt goes in on stdin (a transcript is larger than one argument may be), the run's cwd
is an empty folder of its own that also holds the schema file, and the whole process group is
killed at the timeout, so that no agent process outlives its call. What is common to both CLIs
is here: the daily token budget around every attempt, the reading of a failure into the
pipeline's failure classes, and the one-line errors that name the command that fixes them.
What differs (the command line, how the answer and the usage are reported) is an `AgentCLI`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from consolidator.backends.answers import parse_json_answer, wire_schema
from consolidator.backends.base import (
    AnswerCutOff,
    InputRefused,
    InvalidModelOutput,
    ModelMisconfigured,
    ModelUnavailable,
    Usage,
)
from consolidator.backends.calls import Attempts, TransientFailure
from consolidator.backends.endpoint import scrub
from consolidator.backends.schema_calls import SchemaCallingBackend
from consolidator.backends.token_budget import DailyBudget, TokenLedger, call_ceiling
from consolidator.security.names import escape_hidden
from consolidator.security.redaction import redact
from consolidator.sources.backend_runs import BACKEND_WORKDIR_PREFIX

_MAX_REASON_CHARS = 300
# How long a killed agent gets to exit before its pipes are abandoned.
_KILL_GRACE_SECONDS = 5.0
_LOGGED_OUT = re.compile(
    r"\b401\b|\b403\b|unauthori[sz]ed|forbidden|not logged in|please run /login|log ?in again"
    r"|invalid api key|authentication|missing environment variable|credentials|token expired",
    re.IGNORECASE,
)
_OUT_OF_QUOTA = re.compile(
    r"\b429\b|too many requests|rate.?limit|quota|usage limit|credit balance|limit reached",
    re.IGNORECASE,
)
_CUT_OFF = re.compile(r"max_output_tokens|max_tokens|output token limit", re.IGNORECASE)
_SERVER_FAULT = re.compile(
    r"\b5\d\d\b|overloaded|stream disconnected|timed? ?out|connection|network|unavailable"
    r"|internal server error|bad gateway|reconnecting|error sending request",
    re.IGNORECASE,
)
_UNKNOWN_OPTION = re.compile(
    r"unknown option|unrecognized option|unexpected argument|unknown argument", re.IGNORECASE
)
_UNKNOWN_MODEL = re.compile(
    r"\b404\b|model.{0,40}(not found|does not exist|not supported|unknown|invalid)"
    r"|unknown model|not_found_error",
    re.IGNORECASE,
)


class AgentMissing(ModelUnavailable):
    """The agent's CLI is not installed where it is looked for: nothing can be asked until it
    is, so the work waits (an outage, never the input's fault)."""


class AgentLoggedOut(ModelUnavailable):
    """The agent's CLI is not logged in, or its provider refused the credentials."""


@dataclass(frozen=True)
class AgentRun:
    """What one CLI run reported: its answer text (None when it gave none), the tokens it says
    it used (None when it reported none), whether the answer stopped at the output limit, and
    its error message when it failed."""

    text: str | None
    usage: Usage | None
    cut_off: bool = False
    error: str | None = None


class AgentCLI(Protocol):
    """One agent's command line and how its output reads."""

    # The program's usual name on PATH, the command that logs it in, and the tokens its own
    # instructions add to every prompt (a first guess; the backend learns the real figure).
    program: str
    login_command: str
    overhead_tokens: int

    def command(
        self, executable: str, model: str, schema: Mapping[str, Any], workdir: Path
    ) -> list[str]: ...

    def environment(self, base: Mapping[str, str], max_output_tokens: int) -> dict[str, str]: ...

    def read(self, returncode: int, stdout: str, stderr: str) -> AgentRun: ...

    def clear_session(self, workdir: Path, env: Mapping[str, str]) -> None:
        """Remove whatever session file the run in `workdir` may have left."""


@dataclass(frozen=True)
class AgentCLIConfig:
    model: str
    executable: str
    timeout_seconds: float = 120
    max_output_tokens: int = 16000
    daily_token_budget: int = 1_000_000
    max_attempts: int = 4
    initial_retry_wait_seconds: float = 1.0
    max_retry_wait_seconds: float = 60


class AgentCLIBackend(SchemaCallingBackend):
    """Stage one and phase two through an agent's CLI, within the daily token budget.

    Safe to share between threads: each call runs its own process in its own folder; only the
    learned overhead of the agent's instructions is shared, and it only grows.
    """

    has_context_window = True
    config: AgentCLIConfig

    def __init__(
        self,
        name: str,
        cli: AgentCLI,
        config: AgentCLIConfig,
        ledger: TokenLedger | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.cli = cli
        self.config = config
        self.model = config.model
        self.budget = DailyBudget(ledger, config.daily_token_budget)
        self._environ = dict(os.environ if environ is None else environ)
        self._overhead_tokens = cli.overhead_tokens

    def check_access(self) -> None:
        """Before a pass claims work: the CLI is there and today's budget is not spent."""
        self.locate()
        self.budget.check_room(self._overhead_tokens + self.config.max_output_tokens)

    def locate(self) -> str:
        """The CLI's path, or `AgentMissing` naming how to install or point at it."""
        from shutil import which

        found = which(self.config.executable, path=self._environ.get("PATH"))
        if found is None:
            raise AgentMissing(
                f"{self.cli.program} was not found ({self.config.executable!r} is not on PATH):"
                f" install it and run `{self.cli.login_command}`, or set"
                " CONSOLIDATOR_AGENT_CLI to its path"
            )
        return found

    def _attempt(
        self, prompt: str, schema_name: str, schema: dict[str, Any], attempts: Attempts
    ) -> dict[str, Any]:
        executable = self.locate()
        ceiling = call_ceiling(prompt, self._overhead_tokens, self.config.max_output_tokens)
        day = self.budget.reserve(ceiling)
        attempts.sent += 1
        run: AgentRun | None = None
        try:
            run = self._run(executable, prompt, schema)
        finally:
            spent = run.usage if run is not None and run.usage is not None else None
            # A run that reported nothing (killed at the timeout) is counted at its ceiling.
            counted = spent if spent is not None else Usage(ceiling, 0, 1)
            self.budget.settle(day, schema_name, ceiling, counted)
            if spent is not None:
                attempts.answered += 1
                attempts.input_tokens += spent.input_tokens
                attempts.output_tokens += spent.output_tokens
                self._learn_overhead(ceiling, spent)
        assert run is not None
        if run.error is not None:
            raise self.classify(run.error, cut_off=run.cut_off)
        if not run.text:
            raise InvalidModelOutput(f"{self.cli.program} gave no answer")
        try:
            return parse_json_answer(run.text, schema, truncated=run.cut_off)
        except InvalidModelOutput as exc:
            if run.cut_off:
                raise AnswerCutOff(f"the answer was cut off at the output limit ({exc})") from None
            raise

    def _learn_overhead(self, ceiling: int, spent: Usage) -> None:
        """A run that cost more than its ceiling raises the overhead later ceilings assume."""
        excess = spent.input_tokens + spent.output_tokens - ceiling
        if excess > 0:
            self._overhead_tokens += excess

    def _run(self, executable: str, prompt: str, schema: Mapping[str, Any]) -> AgentRun:
        """One CLI run in a fresh empty folder; the process group is killed at the timeout."""
        with tempfile.TemporaryDirectory(prefix=BACKEND_WORKDIR_PREFIX) as folder:
            workdir = Path(folder)
            argv = self.cli.command(executable, self.model, wire_schema(schema), workdir)
            env = self.cli.environment(self._environ, self.config.max_output_tokens)
            try:
                process = subprocess.Popen(
                    argv,
                    cwd=workdir,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    encoding="utf-8",
                    errors="replace",
                    start_new_session=True,
                )
            except OSError as exc:
                raise AgentMissing(
                    f"{self.cli.program} could not be started ({exc.strerror or exc}): install"
                    f" it and run `{self.cli.login_command}`, or set CONSOLIDATOR_AGENT_CLI"
                ) from None
            try:
                stdout, stderr = process.communicate(prompt, timeout=self.config.timeout_seconds)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                raise TransientFailure(
                    f"{self.cli.program} did not answer within {self.config.timeout_seconds:g}s"
                ) from None
            finally:
                _kill_group(process)
                self.cli.clear_session(workdir, env)
        return self.cli.read(process.returncode, stdout, stderr)

    def classify(self, error: str, *, cut_off: bool = False) -> Exception:
        """The pipeline's failure class for a CLI's error message."""
        program, login = self.cli.program, self.cli.login_command
        reason = _reason(error)
        if cut_off or _CUT_OFF.search(error):
            return AnswerCutOff(f"{program}: the answer was cut off at the output limit ({reason})")
        if _LOGGED_OUT.search(error):
            return AgentLoggedOut(
                f"{program} is not logged in or its credentials were refused ({reason}):"
                f" run `{login}`"
            )
        if _OUT_OF_QUOTA.search(error):
            return TransientFailure(
                f"{program} is rate-limited or out of quota ({reason}); the work is tried again"
                f" later (`{login}` switches the account)"
            )
        if _UNKNOWN_OPTION.search(error):
            return ModelMisconfigured(
                f"{program} does not take an option the backend needs, so it is older than the"
                f" backend supports ({reason}): update it"
            )
        if _UNKNOWN_MODEL.search(error):
            return ModelMisconfigured(
                f"{program} refused the model {self.model!r} ({reason}): set --model"
                " (CONSOLIDATOR_MODEL) to a model your account offers"
            )
        if _SERVER_FAULT.search(error):
            return TransientFailure(f"{program}: {reason}", server_error=True)
        return InputRefused(f"{program}: request refused, not retried: {reason}")

    def _gave_up(self, attempts: Attempts, reason: str) -> str:
        program = self.cli.program
        return f"{self.model} via {program}: gave up after {attempts.sent} attempt(s): {reason}"


def _reason(error: str) -> str:
    """An error as one short line, secrets and keys redacted."""
    text = " ".join(scrub(redact(error).text, None).split())
    return escape_hidden(text[:_MAX_REASON_CHARS])


def _kill_group(process: subprocess.Popen[str]) -> None:
    """End the agent and everything it started (a helper it left behind too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    if process.returncode is None:
        with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
            process.communicate(timeout=_KILL_GRACE_SECONDS)


def json_lines(text: str) -> Sequence[dict[str, Any]]:
    """The JSON objects of a JSONL stream; other lines (warnings) are skipped."""
    found: list[dict[str, Any]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found
