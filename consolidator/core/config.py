"""One settings object, resolved as flags > CONSOLIDATOR_* environment > config file > defaults.

Every setting is declared once, as a field of `Settings` built by `setting()`: its name there is
its config-file key, its flag (`--lease-seconds`) and, upper-cased, its environment variable
(`CONSOLIDATOR_LEASE_SECONDS`); the declaration also carries its default, its help and the range
it must fall in. The CLI builds its options from `SETTINGS`, `build_settings` validates with it,
and the configuration table in docs/configuration.md is generated from it (a test keeps them
equal).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, get_args

from consolidator.core.database_url import BadDatabaseURL, check_url, redact_url
from consolidator.core.errors import ConfigError
from consolidator.core.host import host_name
from consolidator.core.urls import is_loopback_url

BackendChoice = Literal["auto", "openai", "extractive", "codex", "claude-code"]
BACKEND_CHOICES: tuple[BackendChoice, ...] = (
    "auto",
    "openai",
    "extractive",
    "codex",
    "claude-code",
)
ResolvedBackend = Literal["openai", "extractive", "codex", "claude-code"]
DEFAULT_MODEL = "gpt-5-mini"
# The extractive backend's phase-two cooldown unless one is set: its runs cost nothing.
OFFLINE_PHASE2_COOLDOWN_SECONDS = 300
# A model server on this machine (loopback) often runs on a CPU: minutes per answer.
LOCAL_MODEL_TIMEOUT_SECONDS = 600.0
StructuredOutput = Literal["json_schema", "json_schema_with_limits", "json_object"]
STRUCTURED_OUTPUTS: tuple[StructuredOutput, ...] = get_args(StructuredOutput)
OutputLimitParameter = Literal["max_completion_tokens", "max_tokens"]
OUTPUT_LIMIT_PARAMETERS: tuple[OutputLimitParameter, ...] = get_args(OutputLimitParameter)
# The smallest MEMORY.md budget that holds a block or two; below it every run would evict all.
MIN_MEMORY_BUDGET_BYTES = 4096
# The most hits one search returns, through the CLI, the MCP tools and the viewer alike.
MAX_SEARCH_HITS = 100
# The switch of the commands that write the memory folder (`--adopt-memory-files`): not a
# setting, since the other commands have nothing to adopt.
ADOPT_MEMORY_FILES_ENV = "CONSOLIDATOR_ADOPT_MEMORY_FILES"
# CONSOLIDATOR_* variables that are not settings: that switch, and the test suite's and
# benchmarks' databases.
OTHER_ENVIRONMENT = frozenset(
    {
        ADOPT_MEMORY_FILES_ENV,
        "CONSOLIDATOR_TEST_PG_URL",
        "CONSOLIDATOR_BENCH_PG_URL",
        "CONSOLIDATOR_SESSIONS_DIR",
    }
)
# The one-folder variable that `CONSOLIDATOR_SESSIONS_DIRS` replaced, still read when that is unset.
SINGLE_SESSIONS_DIR_ENV = "CONSOLIDATOR_SESSIONS_DIR"
# Written in a default (or any value) to stand for the state directory and this host's name.
_HOME_PLACEHOLDER = "$CONSOLIDATOR_HOME"
_HOST_PLACEHOLDER = "$HOSTNAME"
# A switch reads `on`/`off`; TOML's `true`/`false` read the same.
_SWITCH_VALUES = {"on": True, "off": False, "true": True, "false": False}


@dataclass(frozen=True)
class SettingSpec:
    """One setting as a user gives it: where from, what it defaults to, what it may be.

    `kind` is str, int, float, `Path` (a string with `~` and `$CONSOLIDATOR_HOME` expanded) or
    bool (a switch: on/off). `choices`, `positive`, `minimum` and `maximum` are the checks a
    value must pass; a value that fails one is a `ConfigError` naming the flag and variable.
    """

    default: Any
    help: str
    kind: type = str
    # Empty: the field's name (the declaration gives a key only where it is shorter).
    key: str = ""
    attribute: str = ""
    choices: tuple[str, ...] = ()
    positive: bool = False
    minimum: float | None = None
    maximum: float | None = None

    @property
    def name(self) -> str:
        """The config-file key, which is also the CLI parameter the flag fills."""
        return self.key

    @property
    def option(self) -> str:
        return "--" + self.key.replace("_", "-")

    @property
    def env(self) -> str:
        return "CONSOLIDATOR_" + self.attribute.upper()

    @property
    def flag_type(self) -> type:
        """What the CLI parses the flag as: paths, lists of paths and switches arrive as text."""
        return str if self.kind in (Path, bool, tuple) else self.kind

    @property
    def repeatable(self) -> bool:
        """A list of paths: its flag may be given several times."""
        return self.kind is tuple

    def parse(self, raw: Any, home: Path) -> Any:
        """`raw` (from a flag, the environment, the config file or the default) as this
        setting's value, or `ConfigError`."""
        label = f"{self.option} ({self.env})"
        if self.kind is tuple:
            return self._parse_paths(raw, home, label)
        if self.kind is bool:
            value: Any = _SWITCH_VALUES.get(str(raw).strip().lower())
            if value is None:
                raise ConfigError(f"{label} must be on or off, not {raw!r}")
            return value
        try:
            value = (str if self.kind is Path else self.kind)(raw)
        except (TypeError, ValueError) as exc:
            kind = self.kind.__name__
            article = "an" if kind[0] in "aeiou" else "a"
            raise ConfigError(f"{label} must be {article} {kind}, not {raw!r}") from exc
        if self.choices and value not in self.choices:
            raise ConfigError(f"{label} must be one of {', '.join(self.choices)}, not {value!r}")
        if self.positive and not (value > 0 and math.isfinite(value)):
            raise ConfigError(f"{label} must be a positive number, not {value}")
        low, high = self.minimum, self.maximum
        if low is not None and high is not None and not low <= value <= high:
            raise ConfigError(f"{label} must be between {low:g} and {high:g}")
        if low is not None and high is None and value < low:
            if low == 0:
                raise ConfigError(f"{label} cannot be negative")
            raise ConfigError(f"{label} must be at least {low:g}, not {value}")
        if isinstance(value, str):
            value = value.replace(_HOME_PLACEHOLDER, str(home))
            value = value.replace(_HOST_PLACEHOLDER, host_name())
        return Path(value).expanduser() if self.kind is Path else value

    def _parse_paths(self, raw: Any, home: Path, label: str) -> tuple[Path, ...]:
        """A list (TOML, repeated flags) or text of paths joined by `os.pathsep` (environment)."""
        parts = raw.split(os.pathsep) if isinstance(raw, str) else raw
        if not isinstance(parts, list | tuple) or not all(isinstance(p, str) for p in parts):
            raise ConfigError(f"{label} must be a folder or a list of folders, not {raw!r}")
        one_path = replace(self, kind=Path)
        paths = tuple(dict.fromkeys(one_path.parse(p, home) for p in parts if p.strip()))
        if not paths:
            raise ConfigError(f"{label} names no folder")
        return paths


def agent_session_roots(env: Mapping[str, str]) -> tuple[Path, ...]:
    """Where the supported agents keep their sessions, as they themselves resolve it: Codex
    under `$CODEX_HOME` (default `~/.codex`), Claude Code under `$CLAUDE_CONFIG_DIR` (default
    `~/.claude`), OpenClaw under `~/.openclaw`. Folders that do not exist are scanned as empty."""
    codex = Path(env.get("CODEX_HOME") or "~/.codex").expanduser()
    claude = Path(env.get("CLAUDE_CONFIG_DIR") or "~/.claude").expanduser()
    return (codex / "sessions", claude / "projects", Path("~/.openclaw/agents").expanduser())


def setting(default: Any, help: str, **checks: Any) -> Any:
    """Declare a field of `Settings` as a setting: a `SettingSpec` less its name, which the
    field gives. `key` is for the two settings whose flag and config-file key are shorter than
    their name (`--db`, `--sessions`)."""
    return field(metadata={"setting": SettingSpec(default, help, **checks)})


def count(default: int, help: str) -> Any:
    """A whole number, 0 or more."""
    return setting(default, help, kind=int, minimum=0)


def positive(default: float, help: str, *, minimum: float | None = None) -> Any:
    """A number above 0, whole when the default is."""
    return setting(default, help, kind=type(default), positive=True, minimum=minimum)


def switch(help: str) -> Any:
    """An on/off setting, off unless set."""
    return setting("off", help, kind=bool, choices=("off", "on"))


def fraction(default: float, help: str) -> Any:
    """A share, from 0 to 1."""
    return setting(default, help, kind=float, minimum=0, maximum=1)


@dataclass(frozen=True)
class Settings:
    """The resolved settings of one command or daemon."""

    home: Path = setting(
        "~/.consolidator", "State directory: database, memory folder, config.toml.", kind=Path
    )
    db_url: str = setting(
        f"sqlite:///{_HOME_PLACEHOLDER}/state.db",
        "Database URL: sqlite:///path/state.db or postgresql://user@host:5432/db.",
        key="db",
    )
    memory_dir: Path = setting(
        f"{_HOME_PLACEHOLDER}/memories",
        "Where MEMORY.md and its companions are written.",
        kind=Path,
    )
    sessions_dirs: tuple[Path, ...] = setting(
        "$CODEX_HOME/sessions:$CLAUDE_CONFIG_DIR/projects:~/.openclaw/agents",
        "Folders of agent sessions, all scanned (repeat the flag; a list in config.toml; joined "
        "by `:` in the variable, or one folder in CONSOLIDATOR_SESSIONS_DIR). Default: Codex's, "
        "Claude Code's (CODEX_HOME and CLAUDE_CONFIG_DIR as the agents read them, else "
        "`~/.codex`, `~/.claude`) and OpenClaw's; each file's format is read from its content.",
        kind=tuple,
        key="sessions",
    )
    source_id: str = setting(
        _HOST_PLACEHOLDER,
        "Names the sessions folder this worker sees. Scans delete, and stage one claims, only "
        "threads registered under this name; workers sharing one folder (replicas on one mount) "
        "must use the same value.",
    )
    backend: BackendChoice = setting(
        "auto",
        "auto, openai, extractive, codex or claude-code (the agent CLI you are logged in to, "
        "see docs/backends.md). auto = openai when OPENAI_API_KEY or OPENAI_BASE_URL is set, "
        "else extractive (offline).",
        choices=BACKEND_CHOICES,
    )
    model: str = setting(DEFAULT_MODEL, "Model name (claude-code: haiku unless set).")
    daily_token_budget: int = positive(
        1_000_000,
        "codex and claude-code: tokens per UTC day that stage one and phase two may spend "
        "together; work past it waits for the next day.",
    )
    agent_cli: str = setting("", "codex, claude-code: the agent's program (default: on PATH).")
    min_idle_seconds: int = count(
        3600, "A rollout must be idle this long before stage one reads it."
    )
    max_age_days: int = count(30, "Ignore rollouts older than this (0 = no limit).")
    phase2_cooldown_seconds: int = count(
        21600,
        "Minimum time between two phase-two runs that changed memory (300 with the offline "
        "extractive backend unless set); a note (`consolidator note`, the MCP add_note "
        "tool) does not wait.",
    )
    lease_seconds: int = positive(
        600, "Lease length for claimed jobs; a heartbeat renews it while work runs."
    )
    stage1_concurrency: int = positive(8, "Stage-one extractions running at once on this host.")
    stage1_retry_budget: int = count(
        3, "Failed attempts allowed per thread before it is left alone (a newer rollout resets it)."
    )
    scan_interval_seconds: int = positive(
        300, "Daemon: time between passes (scan + stage one + phase-two check)."
    )
    shutdown_grace_seconds: int = count(
        30, "Daemon: after SIGTERM, how long work in flight may take to finish."
    )
    memory_budget_bytes: int = positive(
        65536,
        "Cap on MEMORY.md: older tasks fold into a compact entry first, then the stalest"
        " single-witness bullets are evicted.",
        minimum=MIN_MEMORY_BUDGET_BYTES,
    )
    max_shrink_fraction: float = fraction(
        0.5,
        "Refuse a phase-two result that removes more than this share of the memory "
        "(unless --allow-shrink).",
    )
    max_bullets_per_input: int = positive(
        60,
        "Refuse a phase-two answer that adds more than this many bullets per session it "
        "consolidates (the input is set aside with the reason).",
    )
    max_bytes_per_input: int = positive(
        16384,
        "Refuse a phase-two answer that grows MEMORY.md by more than this many bytes per "
        "session it consolidates (the input is set aside with the reason).",
    )
    max_vanish_fraction: float = fraction(
        0.5,
        "Hold deletions when one scan finds more than this share (and more than 10) of the "
        "threads gone, or the sessions folder missing or empty; `scan --confirm-deletions` "
        "applies them.",
    )
    review: bool = switch(
        "on: a phase-two result waits as a pending version until `approve` (`review` lists "
        "them); off: it is published at once. Skills wait for approval either way."
    )
    forget_retired_sessions: bool = switch(
        "off: a session whose transcript its agent removed after its retention period (Claude "
        "Code's cleanupPeriodDays) keeps its memory until `forget`; on: it is forgotten."
    )
    trust_agent_notes: bool = switch(
        "off: a note an agent adds through MCP waits until a person approves it (`review` "
        "lists it, `approve NOTE_ID` adds it); on: it becomes an input at once, as a user's "
        "`consolidator note` does."
    )
    prune_unused_days: int = count(
        0,
        "Forget sessions that no later session used (and that were not active) for this many "
        "days; 0 = never.",
    )
    context_window_tokens: int = positive(
        128000,
        "The model's context window; rollouts are cut and phase-two requests sliced to fit it.",
    )
    max_output_tokens: int = positive(
        16000,
        "Most tokens one model answer may use; every request leaves this much of the window "
        "for the answer (a stage-one transcript is cut shorter, phase-two slices are sized).",
    )
    model_timeout_seconds: float = positive(
        120.0,
        "Timeout of one model request (600 when OPENAI_BASE_URL is on this machine, unless "
        "set: a local CPU server takes minutes per answer).",
    )
    db_connect_timeout_seconds: float = positive(
        10.0, "Give up connecting to the database after this long (exit code 3)."
    )
    db_statement_timeout_seconds: float = positive(
        300.0,
        "PostgreSQL: cancel one statement that runs (or waits for a lock) this long (exit code 3).",
    )
    openai_api: Literal["chat", "responses"] = setting(
        "chat",
        "Which OpenAI endpoint to call: chat (chat completions) or responses.",
        choices=("chat", "responses"),
    )
    structured_output: StructuredOutput = setting(
        "json_schema",
        "How an answer is held to its JSON schema: json_schema (strict, as the OpenAI API takes "
        "it; length limits only stated in the field descriptions), json_schema_with_limits "
        "(the schema with its maxLength limits, for servers that compile it to a grammar: "
        "llama.cpp, vLLM), json_object (any JSON object, the schema in the prompt, for servers "
        "without json_schema).",
        choices=STRUCTURED_OUTPUTS,
    )
    output_limit_parameter: OutputLimitParameter = setting(
        "max_completion_tokens",
        "The chat request's name for the output limit: max_completion_tokens (the OpenAI API) "
        "or max_tokens (older compatible servers).",
        choices=OUTPUT_LIMIT_PARAMETERS,
    )
    # Not settings of ours: the SDK's own variables, read as they are.
    openai_api_key: str | None = None
    openai_base_url: str | None = None

    @property
    def db_url_for_display(self) -> str:
        return redact_url(self.db_url)

    def resolved_backend(self) -> ResolvedBackend:
        if self.backend != "auto":
            return self.backend
        return "openai" if (self.openai_api_key or self.openai_base_url) else "extractive"

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["db_url"] = self.db_url_for_display
        shown["openai_api_key"] = "***" if self.openai_api_key else None
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


def _spec(declared: Field[Any]) -> SettingSpec:
    spec: SettingSpec = declared.metadata["setting"]
    return replace(spec, attribute=declared.name, key=spec.key or declared.name)


SETTINGS: tuple[SettingSpec, ...] = tuple(
    _spec(declared) for declared in fields(Settings) if "setting" in declared.metadata
)
_BY_KEY = {spec.key: spec for spec in SETTINGS}


def setting_default(key: str) -> Any:
    """The declared default of the setting `key`, for code that needs it without settings."""
    return _BY_KEY[key].default


def setting_spec(key: str) -> SettingSpec:
    """The declaration of the setting whose config-file key is `key`."""
    return _BY_KEY[key]


def load_config_file(path: Path, *, required: bool = False) -> dict[str, Any]:
    """Read `config.toml` (`lease_seconds = 300`); no file is no settings unless `required`."""
    try:
        with path.open("rb") as handle:
            import tomllib  # most homes have no config file: loaded only to read one

            data = tomllib.load(handle)
    except (FileNotFoundError, NotADirectoryError):
        if required:
            raise ConfigError(f"--config {path}: no such file") from None
        return {}
    except IsADirectoryError:
        raise ConfigError(f"--config {path}: is a directory, not a TOML file") from None
    except (OSError, ValueError) as exc:  # ValueError: tomllib.TOMLDecodeError
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    unknown = sorted(set(data) - set(_BY_KEY))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(unknown)} in {path}; known: {', '.join(_BY_KEY)}"
        )
    return data


def build_settings(
    explicit: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    config_file: Path | None = None,
) -> Settings:
    """Resolve every setting.

    `explicit` holds the values given as flags, by key (absent or None = not given). The
    environment and then `config_file` (default `$CONSOLIDATOR_HOME/config.toml`) fill the rest.
    """
    env = dict(os.environ if environ is None else environ)
    check_environment(env)
    raw: dict[str, Any] = {}
    for spec in SETTINGS:
        if explicit.get(spec.key) not in (None, ()):
            raw[spec.key] = explicit[spec.key]
        elif env.get(spec.env):
            raw[spec.key] = env[spec.env]
    if "sessions" not in raw and env.get(SINGLE_SESSIONS_DIR_ENV):
        raw["sessions"] = [env[SINGLE_SESSIONS_DIR_ENV]]
    home_spec = _BY_KEY["home"]
    home = home_spec.parse(raw.get("home", home_spec.default), Path.home())
    file_values = load_config_file(
        config_file or home / "config.toml", required=config_file is not None
    )
    for key, value in file_values.items():
        raw.setdefault(key, value)
    raw.setdefault("sessions", [str(root) for root in agent_session_roots(env)])
    home = home_spec.parse(raw.get("home", home_spec.default), Path.home())
    values = {
        spec.attribute: spec.parse(raw.get(spec.key, spec.default), home) for spec in SETTINGS
    }
    _check_together(values)
    settings = Settings(
        **values,
        openai_api_key=env.get("OPENAI_API_KEY") or None,
        openai_base_url=env.get("OPENAI_BASE_URL") or None,
    )
    if "phase2_cooldown_seconds" not in raw and settings.resolved_backend() == "extractive":
        # The offline backend costs nothing to run: a cooldown of hours only delays memory.
        settings = replace(settings, phase2_cooldown_seconds=OFFLINE_PHASE2_COOLDOWN_SECONDS)
    if "model_timeout_seconds" not in raw and is_loopback_url(settings.openai_base_url):
        settings = replace(settings, model_timeout_seconds=LOCAL_MODEL_TIMEOUT_SECONDS)
    return settings


def _check_together(values: Mapping[str, Any]) -> None:
    """The rules between settings, and the database URL's own."""
    try:
        check_url(values["db_url"])
    except BadDatabaseURL as exc:
        raise ConfigError(f"{exc} (set --db or CONSOLIDATOR_DB_URL)") from exc
    if values["max_output_tokens"] * 2 > values["context_window_tokens"]:
        raise ConfigError(
            "--max-output-tokens must be at most half of --context-window-tokens "
            f"({values['context_window_tokens']}), not {values['max_output_tokens']}"
        )


def check_environment(env: Mapping[str, str]) -> None:
    """A CONSOLIDATOR_* variable that names no setting is a typo; ignoring it would hide it."""
    known = {spec.env for spec in SETTINGS} | OTHER_ENVIRONMENT
    unknown = sorted(name for name in env if name.startswith("CONSOLIDATOR_") and name not in known)
    if not unknown:
        return
    import difflib  # only a typo needs it

    near = {name: difflib.get_close_matches(name, sorted(known), n=1) for name in unknown}
    if any(near.values()):
        named = [name + (f" (did you mean {m[0]}?)" if m else "") for name, m in near.items()]
        raise ConfigError(f"unknown environment variable {', '.join(named)}")
    raise ConfigError(
        f"unknown environment variable {', '.join(unknown)}; the settings are "
        f"{', '.join(spec.env for spec in SETTINGS)}"
    )


def settings_table_markdown() -> str:
    """The configuration table of docs/configuration.md, generated from `SETTINGS` (a test
    keeps them equal)."""
    lines = ["| flag | environment | default | meaning |", "|---|---|---|---|"]
    for spec in SETTINGS:
        lines.append(f"| `{spec.option}` | `{spec.env}` | `{spec.default}` | {spec.help} |")
    lines.append(
        "| | `OPENAI_API_KEY`, `OPENAI_BASE_URL` | unset | the openai backend's credentials "
        "and endpoint (any OpenAI-compatible server) |"
    )
    return "\n".join(lines)
