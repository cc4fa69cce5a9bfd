"""One settings object, resolved as flags > CONSOLIDATOR_* environment > config file > defaults.

Every setting is declared once in `SETTINGS`; the CLI builds its options from that list, and
the README's configuration table is checked against it by a test.
"""

from __future__ import annotations

import os
import socket
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

from consolidator.errors import ConfigError

BackendChoice = Literal["auto", "openai", "extractive"]
BACKEND_CHOICES: tuple[BackendChoice, ...] = ("auto", "openai", "extractive")
DEFAULT_MODEL = "gpt-5-mini"


@dataclass(frozen=True)
class SettingSpec:
    name: str
    env: str
    default: Any
    kind: type
    help: str
    flag: bool = True

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")


SETTINGS: tuple[SettingSpec, ...] = (
    SettingSpec(
        "home",
        "CONSOLIDATOR_HOME",
        "~/.consolidator",
        str,
        "State directory: database, memory folder, config.toml.",
    ),
    SettingSpec(
        "db",
        "CONSOLIDATOR_DB_URL",
        "sqlite:///$CONSOLIDATOR_HOME/state.db",
        str,
        "Database URL: sqlite:///path/state.db or postgresql://user@host:5432/db.",
    ),
    SettingSpec(
        "memory_dir",
        "CONSOLIDATOR_MEMORY_DIR",
        "$CONSOLIDATOR_HOME/memories",
        str,
        "Where MEMORY.md and its companions are written.",
    ),
    SettingSpec(
        "sessions",
        "CONSOLIDATOR_SESSIONS_DIR",
        "~/.codex/sessions",
        str,
        "Folder of agent rollouts (Codex layout; Claude Code transcripts are sniffed too).",
    ),
    SettingSpec(
        "source_id",
        "CONSOLIDATOR_SOURCE_ID",
        "$HOSTNAME",
        str,
        "Names the sessions folder this worker sees. Scans delete, and stage one claims, only "
        "threads registered under this name; workers sharing one folder (replicas on one mount) "
        "must use the same value.",
    ),
    SettingSpec(
        "backend",
        "CONSOLIDATOR_BACKEND",
        "auto",
        str,
        "auto, openai or extractive. auto = openai when OPENAI_API_KEY or "
        "OPENAI_BASE_URL is set, else extractive (offline).",
    ),
    SettingSpec(
        "model", "CONSOLIDATOR_MODEL", DEFAULT_MODEL, str, "Model name for the openai backend."
    ),
    SettingSpec(
        "min_idle_seconds",
        "CONSOLIDATOR_MIN_IDLE_SECONDS",
        3600,
        int,
        "A rollout must be idle this long before stage one reads it.",
    ),
    SettingSpec(
        "max_age_days",
        "CONSOLIDATOR_MAX_AGE_DAYS",
        30,
        int,
        "Ignore rollouts older than this (0 = no limit).",
    ),
    SettingSpec(
        "phase2_cooldown_seconds",
        "CONSOLIDATOR_PHASE2_COOLDOWN_SECONDS",
        21600,
        int,
        "Minimum time between two phase-two runs that changed memory (300 with the offline "
        "extractive backend unless set).",
    ),
    SettingSpec(
        "lease_seconds",
        "CONSOLIDATOR_LEASE_SECONDS",
        600,
        int,
        "Lease length for claimed jobs; a heartbeat renews it while work runs.",
    ),
    SettingSpec(
        "stage1_concurrency",
        "CONSOLIDATOR_STAGE1_CONCURRENCY",
        8,
        int,
        "Stage-one extractions running at once on this host.",
    ),
    SettingSpec(
        "stage1_retry_budget",
        "CONSOLIDATOR_STAGE1_RETRY_BUDGET",
        3,
        int,
        "Failed attempts allowed per thread before it is left alone (a newer rollout resets it).",
    ),
    SettingSpec(
        "scan_interval_seconds",
        "CONSOLIDATOR_SCAN_INTERVAL_SECONDS",
        300,
        int,
        "Daemon: time between passes (scan + stage one + phase-two check).",
    ),
    SettingSpec(
        "shutdown_grace_seconds",
        "CONSOLIDATOR_SHUTDOWN_GRACE_SECONDS",
        30,
        int,
        "Daemon: after SIGTERM, how long work in flight may take to finish.",
    ),
    SettingSpec(
        "memory_budget_bytes",
        "CONSOLIDATOR_MEMORY_BUDGET_BYTES",
        65536,
        int,
        "Cap on MEMORY.md: older tasks fold into a compact entry first, then the stalest"
        " single-witness bullets are evicted.",
    ),
    SettingSpec(
        "max_shrink_fraction",
        "CONSOLIDATOR_MAX_SHRINK_FRACTION",
        0.5,
        float,
        "Refuse a phase-two result that removes more than this share of the memory "
        "(unless --allow-shrink).",
    ),
    SettingSpec(
        "max_vanish_fraction",
        "CONSOLIDATOR_MAX_VANISH_FRACTION",
        0.5,
        float,
        "Hold deletions when one scan finds more than this share (and more than 10) of the "
        "threads gone, or the sessions folder missing or empty; `scan --confirm-deletions` "
        "applies them.",
    ),
    SettingSpec(
        "context_window_tokens",
        "CONSOLIDATOR_CONTEXT_WINDOW_TOKENS",
        128000,
        int,
        "The model's context window; rollouts are cut and phase-two requests sliced to fit it.",
    ),
    SettingSpec(
        "max_output_tokens",
        "CONSOLIDATOR_MAX_OUTPUT_TOKENS",
        16000,
        int,
        "Most tokens one model answer may use; phase two sizes its slices so answers fit it.",
    ),
    SettingSpec(
        "model_timeout_seconds",
        "CONSOLIDATOR_MODEL_TIMEOUT_SECONDS",
        120.0,
        float,
        "Timeout of one model request.",
    ),
    SettingSpec(
        "db_connect_timeout_seconds",
        "CONSOLIDATOR_DB_CONNECT_TIMEOUT_SECONDS",
        10.0,
        float,
        "Give up connecting to the database after this long (exit code 3).",
    ),
    SettingSpec(
        "db_statement_timeout_seconds",
        "CONSOLIDATOR_DB_STATEMENT_TIMEOUT_SECONDS",
        300.0,
        float,
        "PostgreSQL: cancel one statement that runs (or waits for a lock) this long (exit code 3).",
    ),
    SettingSpec(
        "openai_api",
        "CONSOLIDATOR_OPENAI_API",
        "chat",
        str,
        "Which OpenAI endpoint to call: chat (chat completions) or responses.",
    ),
)

_BY_NAME = {spec.name: spec for spec in SETTINGS}
# The extractive backend's phase-two cooldown unless one is set: its runs cost nothing.
OFFLINE_PHASE2_COOLDOWN_SECONDS = 300
# The smallest MEMORY.md budget that holds a block or two; below it every run would evict all.
MIN_MEMORY_BUDGET_BYTES = 4096
# CONSOLIDATOR_* variables that are not settings: the test suite's and benchmarks' databases.
OTHER_ENVIRONMENT = frozenset({"CONSOLIDATOR_TEST_PG_URL", "CONSOLIDATOR_BENCH_PG_URL"})


@dataclass(frozen=True)
class Settings:
    home: Path
    db_url: str
    memory_dir: Path
    sessions_dir: Path
    source_id: str
    backend: BackendChoice
    model: str
    min_idle_seconds: int
    max_age_days: int
    phase2_cooldown_seconds: int
    lease_seconds: int
    stage1_concurrency: int
    stage1_retry_budget: int
    scan_interval_seconds: int
    shutdown_grace_seconds: int
    memory_budget_bytes: int
    max_shrink_fraction: float
    max_vanish_fraction: float
    context_window_tokens: int
    max_output_tokens: int
    model_timeout_seconds: float
    db_connect_timeout_seconds: float
    db_statement_timeout_seconds: float
    openai_api: Literal["chat", "responses"]
    openai_api_key: str | None = None
    openai_base_url: str | None = None

    @property
    def db_url_for_display(self) -> str:
        from consolidator.db.engine import redact_url

        return redact_url(self.db_url)

    def resolved_backend(self) -> Literal["openai", "extractive"]:
        if self.backend != "auto":
            return self.backend
        return "openai" if (self.openai_api_key or self.openai_base_url) else "extractive"

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["db_url"] = self.db_url_for_display
        shown["openai_api_key"] = "***" if self.openai_api_key else None
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


def default_home(environ: Mapping[str, str]) -> str:
    return environ.get("CONSOLIDATOR_HOME") or _BY_NAME["home"].default


def load_config_file(path: Path, *, required: bool = False) -> dict[str, Any]:
    """Read `config.toml`: keys are setting names (`lease_seconds = 300`). A missing file is
    no settings, unless it was named explicitly (`required`)."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except (FileNotFoundError, NotADirectoryError):
        if required:
            raise ConfigError(f"--config {path}: no such file") from None
        return {}
    except IsADirectoryError:
        raise ConfigError(f"--config {path}: is a directory, not a TOML file") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    unknown = sorted(set(data) - set(_BY_NAME))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(unknown)} in {path}; known: {', '.join(_BY_NAME)}"
        )
    return data


def build_settings(
    explicit: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    config_file: Path | None = None,
) -> Settings:
    """Resolve every setting.

    `explicit` holds the values given as flags (absent or None = not given). The environment
    and then `config_file` (default `$CONSOLIDATOR_HOME/config.toml`) fill the rest.
    """
    from consolidator.db.engine import BadDatabaseURL, normalize_url

    env = dict(os.environ if environ is None else environ)
    check_environment(env)
    raw: dict[str, Any] = {}
    for spec in SETTINGS:
        if explicit.get(spec.name) is not None:
            raw[spec.name] = explicit[spec.name]
        elif env.get(spec.env):
            raw[spec.name] = env[spec.env]
    home = Path(str(raw.get("home") or _BY_NAME["home"].default)).expanduser()
    file_values = load_config_file(
        config_file or home / "config.toml", required=config_file is not None
    )
    for name, value in file_values.items():
        raw.setdefault(name, value)
    cooldown_given = "phase2_cooldown_seconds" in raw
    for spec in SETTINGS:
        raw.setdefault(spec.name, spec.default)
    values = {spec.name: _coerce(spec, raw[spec.name]) for spec in SETTINGS}

    home = Path(values["home"]).expanduser()
    db_url = str(values["db"]).replace("$CONSOLIDATOR_HOME", str(home))
    try:
        normalize_url(db_url)
    except BadDatabaseURL as exc:
        raise ConfigError(f"{exc} (set --db or CONSOLIDATOR_DB_URL)") from exc
    memory_dir = Path(str(values["memory_dir"]).replace("$CONSOLIDATOR_HOME", str(home)))
    backend = values["backend"]
    if backend not in BACKEND_CHOICES:
        raise ConfigError(f"--backend must be one of {', '.join(BACKEND_CHOICES)}, not {backend!r}")
    if values["openai_api"] not in ("chat", "responses"):
        raise ConfigError(f"--openai-api must be chat or responses, not {values['openai_api']!r}")
    for name in (
        "lease_seconds",
        "stage1_concurrency",
        "scan_interval_seconds",
        "memory_budget_bytes",
        "context_window_tokens",
        "max_output_tokens",
        "model_timeout_seconds",
        "db_connect_timeout_seconds",
        "db_statement_timeout_seconds",
    ):
        if not values[name] > 0 or values[name] == float("inf"):
            raise ConfigError(
                f"{_BY_NAME[name].option} ({_BY_NAME[name].env}) must be a positive number, "
                f"not {values[name]}"
            )
    if values["memory_budget_bytes"] < MIN_MEMORY_BUDGET_BYTES:
        raise ConfigError(
            f"--memory-budget-bytes (CONSOLIDATOR_MEMORY_BUDGET_BYTES) must be at least "
            f"{MIN_MEMORY_BUDGET_BYTES}, not {values['memory_budget_bytes']}"
        )
    for name in (
        "min_idle_seconds",
        "max_age_days",
        "phase2_cooldown_seconds",
        "stage1_retry_budget",
        "shutdown_grace_seconds",
    ):
        if values[name] < 0:
            raise ConfigError(f"{_BY_NAME[name].option} ({_BY_NAME[name].env}) cannot be negative")
    if values["max_output_tokens"] * 2 > values["context_window_tokens"]:
        raise ConfigError(
            "--max-output-tokens must be at most half of --context-window-tokens "
            f"({values['context_window_tokens']}), not {values['max_output_tokens']}"
        )
    for name in ("max_shrink_fraction", "max_vanish_fraction"):
        if not 0 <= values[name] <= 1:
            raise ConfigError(f"{_BY_NAME[name].option} must be between 0 and 1")
    settings = Settings(
        home=home,
        db_url=db_url,
        memory_dir=memory_dir.expanduser(),
        sessions_dir=Path(values["sessions"]).expanduser(),
        source_id=str(values["source_id"]).replace("$HOSTNAME", socket.gethostname()),
        backend=backend,
        model=values["model"],
        min_idle_seconds=values["min_idle_seconds"],
        max_age_days=values["max_age_days"],
        phase2_cooldown_seconds=values["phase2_cooldown_seconds"],
        lease_seconds=values["lease_seconds"],
        stage1_concurrency=values["stage1_concurrency"],
        stage1_retry_budget=values["stage1_retry_budget"],
        scan_interval_seconds=values["scan_interval_seconds"],
        shutdown_grace_seconds=values["shutdown_grace_seconds"],
        memory_budget_bytes=values["memory_budget_bytes"],
        max_shrink_fraction=values["max_shrink_fraction"],
        max_vanish_fraction=values["max_vanish_fraction"],
        context_window_tokens=values["context_window_tokens"],
        max_output_tokens=values["max_output_tokens"],
        model_timeout_seconds=values["model_timeout_seconds"],
        db_connect_timeout_seconds=values["db_connect_timeout_seconds"],
        db_statement_timeout_seconds=values["db_statement_timeout_seconds"],
        openai_api=values["openai_api"],
        openai_api_key=env.get("OPENAI_API_KEY") or None,
        openai_base_url=env.get("OPENAI_BASE_URL") or None,
    )
    if not cooldown_given and settings.resolved_backend() == "extractive":
        # The offline backend costs nothing to run: a cooldown of hours only delays memory.
        settings = replace(settings, phase2_cooldown_seconds=OFFLINE_PHASE2_COOLDOWN_SECONDS)
    return settings


def check_environment(env: Mapping[str, str]) -> None:
    """A CONSOLIDATOR_* variable that names no setting is a typo; ignoring it would hide it."""
    known = {spec.env for spec in SETTINGS} | OTHER_ENVIRONMENT
    unknown = sorted(name for name in env if name.startswith("CONSOLIDATOR_") and name not in known)
    if unknown:
        raise ConfigError(
            f"unknown environment variable {', '.join(unknown)}; the settings are "
            f"{', '.join(spec.env for spec in SETTINGS)}"
        )


def _coerce(spec: SettingSpec, value: Any) -> Any:
    try:
        return spec.kind(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"{spec.option} ({spec.env}) must be a {spec.kind.__name__}, not {value!r}"
        ) from exc


def settings_table_markdown() -> str:
    """The README's configuration table, generated from `SETTINGS` (a test keeps them equal)."""
    lines = ["| flag | environment | default | meaning |", "|---|---|---|---|"]
    for spec in SETTINGS:
        lines.append(f"| `{spec.option}` | `{spec.env}` | `{spec.default}` | {spec.help} |")
    lines.append(
        "| | `OPENAI_API_KEY`, `OPENAI_BASE_URL` | unset | the openai backend's credentials "
        "and endpoint (any OpenAI-compatible server) |"
    )
    return "\n".join(lines)
