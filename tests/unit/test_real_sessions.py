"""Real, published session files (tests/fixtures/real, see SOURCES.md there) read right.

Every expected value below was written by hand after reading the file it belongs to; none is
computed by the code under test. The corpus is laid out the way the agents write it, so a
scan of its root is a scan of a real `~/.claude/projects` and `~/.codex/sessions`.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from consolidator.backends.base import Stage1Input
from consolidator.backends.extractive.backend import ExtractiveBackend
from consolidator.db.records import Phase2Result, Stage1Payload, ThreadState
from consolidator.db.store import Store
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.memory.codec import encode
from consolidator.memory.offline_notes import parse_raw_memory
from consolidator.phases.scan import scan
from consolidator.phases.stage_one.input import build_input
from consolidator.sources.items import ItemKind
from consolidator.sources.reader import read_header
from tests.store_reads import status_counts

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "real"
FORMATS_DOC = Path(__file__).resolve().parents[2] / "docs" / "session-formats.md"
BUDGET_CHARS = 400_000
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{200,}={0,2}")

FUM = "claude/projects/-home-USER-projects-spotter-worktrees-spotter-fum"
FUM_SESSION = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
FUM_CWD = "/home/USER/projects/spotter-worktrees/spotter-fum"
ORPHAN_PARENT = "6c2214d7-b87e-4432-8e41-22ba294ea584"
SESSION_SHARE = "claude/projects/-Users-pete-git-moredip-session-share"
DESKTOP_COMPACTED = (
    "codex/sessions/2026/02/23/"
    "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
)

# Captured by us with the real Codex CLI against the local test server
# (tests/fixtures/real/capture_codex.py), in a git repository on a branch.
CAPTURED = "codex/sessions/2026/12/01/rollout-2026-12-01T"
CAPTURED_CWD = "/tmp/codex-capture/work/shop-api"
CAPTURED_BRANCH = "fix-invoice-rounding"
ROUNDING = "Invoice totals are off by a cent; how should rounding be done here?"
EXEC_ANSWER = "Round each line with Decimal and ROUND_HALF_UP, then sum the rounded lines."
EXEC_ID = "01a23161-44f7-7962-93cb-148d826673f1"
EXEC = f"{CAPTURED}11-33-07-{EXEC_ID}.jsonl"
FORK_ID = "01a23161-4812-7d71-995f-3012a0dd3306"
FORK = f"{CAPTURED}11-33-08-{FORK_ID}.jsonl"
RESUMED_ID = "01a23161-4dfc-7bb2-a3b9-a47825b3888d"
RESUMED_EXEC = f"{CAPTURED}11-33-10-{RESUMED_ID}.jsonl"
COMPACTED_ID = "01a23161-5997-7253-b510-0a77f65e20fb"
CLI_COMPACTED = f"{CAPTURED}11-33-13-{COMPACTED_ID}.jsonl"
REVERTED_ID = "01a23167-3a4d-71b0-8ec2-3e7428bad6a3"
REVERTED = f"{CAPTURED}11-39-38-{REVERTED_ID}.jsonl"
AFTER_REVERT = "01a23167-3b36-7463-8531-3c8ad77a12d9"
AFTER_REVERT_FILE = f"{CAPTURED}11-39-38-{REVERTED_ID}_{AFTER_REVERT}.jsonl"
PRE_ENVELOPE_25 = f"{CAPTURED}11-33-15-abe798b0-5650-427c-a584-0aad42833cba.jsonl"
PRE_ENVELOPE_20 = f"{CAPTURED}11-33-15-7f0f032c-3a92-4cc6-b7dc-654f2f6bbefe.jsonl"
VSCODE_ID = "019d9353-333c-7c41-a909-26f5c6221a5a"
VSCODE = f"codex/sessions/2026/04/15/rollout-2026-04-15T18-46-36-{VSCODE_ID}.jsonl"
CODEMIE = "claude/projects/-Users-user-repo"
CODEMIE_CWD = "/Users/user/repo"
CODEMIE_TUI_ID = "019e1625-789d-76c0-80ab-3724b5ddb799"
CODEMIE_TUI = f"codex/sessions/2026/05/11/rollout-2026-05-11T11-26-55-{CODEMIE_TUI_ID}.jsonl"
CODEMIE_DEV = "claude/projects/-Users-Nikita_Levyankov-repos-EPMCDME-codemie-ai-codemie-code"
CODEMIE_DEV_CWD = "/Users/Nikita_Levyankov/repos/EPMCDME/codemie-ai/codemie-code"
CODEMIE_DESKTOP_ID = "019e1695-0522-7c83-8b39-0dd379793f80"
CODEMIE_DESKTOP = (
    f"codex/sessions/2026/05/11/rollout-2026-05-11T13-28-45-{CODEMIE_DESKTOP_ID}.jsonl"
)
SOPH = "claude/projects/-Users-soph-Work-entire-devenv-cli"
SOPH_CWD = "/Users/soph/Work/entire/devenv/cli"
PACKMIND = "claude/projects/-Users-cedricteyton-Code-agents-md-evaluator"
PACKMIND_CWD = "/Users/cedricteyton/Code/agents-md-evaluator"


@dataclass(frozen=True)
class Expected:
    source: str
    thread_id: str
    cwd: str | None
    git_branch: str | None
    format_version: str
    parent_thread_id: str | None
    # Words that must reach the stage-one input as the user's (a sub-agent file: the task
    # its parent delegated, which reaches it as the agent's words).
    request: str
    other_cwds: tuple[str, ...] = ()
    # A linked thread with words of its own user (a fork, a later segment), not a sub-agent.
    own_requests: bool = False


EXPECTED: dict[str, Expected] = {
    # Codex 0.171.0 `exec`: `ordinal` on every line, `world_state`, `token_usage_record`,
    # `history_mode: paginated`, and the git branch in `session_meta`.
    EXEC: Expected(
        "codex",
        EXEC_ID,
        CAPTURED_CWD,
        CAPTURED_BRANCH,
        "envelope 0.171.0 codex_exec",
        None,
        ROUNDING,
    ),
    # `codex exec fork` of the session above: a new file holding only the fork's turns, its
    # `session_meta` naming the parent (`forked_from_id`, `history_base`).
    FORK: Expected(
        "codex",
        FORK_ID,
        CAPTURED_CWD,
        CAPTURED_BRANCH,
        "envelope 0.171.0 codex_exec",
        EXEC_ID,
        "Try banker's rounding (ROUND_HALF_EVEN) instead and compare.",
        own_requests=True,
    ),
    # Written by Codex 0.135.0, then resumed by 0.171.0, which appended its turn to this file.
    RESUMED_EXEC: Expected(
        "codex",
        RESUMED_ID,
        CAPTURED_CWD,
        CAPTURED_BRANCH,
        "envelope 0.135.0 codex_exec",
        None,
        "Should tax be rounded per line or per invoice?",
    ),
    # Resumed with a small `model_auto_compact_token_limit`: a `compacted` line, and the
    # model's hand-off summary as an assistant message marked `compaction_output`.
    CLI_COMPACTED: Expected(
        "codex",
        COMPACTED_ID,
        CAPTURED_CWD,
        CAPTURED_BRANCH,
        "envelope 0.171.0 codex_exec",
        None,
        "Add a test that pins the rounding of the sample invoice.",
    ),
    # Three turns through `codex app-server` 0.171.0 (what the editor extensions use), the
    # second reverted (`thread/revert`) before the third; `originator` is the client's name.
    REVERTED: Expected(
        "codex",
        REVERTED_ID,
        CAPTURED_CWD,
        CAPTURED_BRANCH,
        "envelope 0.171.0 consolidator_capture",
        None,
        ROUNDING,
    ),
    # The turns after the revert: `<thread>_<rollout>`, the thread's id in `session_meta` and a
    # `history_base` naming where in the thread's file it continues.
    AFTER_REVERT_FILE: Expected(
        "codex",
        f"{REVERTED_ID}.segment-{AFTER_REVERT}",
        CAPTURED_CWD,
        CAPTURED_BRANCH,
        "envelope 0.171.0 consolidator_capture",
        REVERTED_ID,
        "Add a test that pins the rounding of the sample invoice.",
        own_requests=True,
    ),
    # Codex 0.25.0, before the envelope: the cwd is only in the `<environment_context>`.
    PRE_ENVELOPE_25: Expected(
        "codex",
        "abe798b0-5650-427c-a584-0aad42833cba",
        CAPTURED_CWD,
        CAPTURED_BRANCH,
        "pre-envelope",
        None,
        ROUNDING,
    ),
    # Codex 0.20.0 `exec` records no `<environment_context>`: nothing in the file names a cwd.
    PRE_ENVELOPE_20: Expected(
        "codex",
        "7f0f032c-3a92-4cc6-b7dc-654f2f6bbefe",
        None,
        CAPTURED_BRANCH,
        "pre-envelope",
        None,
        ROUNDING,
    ),
    "codex/sessions/2026/06/05/rollout-2026-06-05T04-58-20-019e9625-802f-7e91-840a-cfe88d14117a.jsonl": Expected(  # noqa: E501
        "codex",
        "019e9625-802f-7e91-840a-cfe88d14117a",
        "/tmp/agent-history-real-agent/codex/workspace",
        None,
        "envelope 0.135.0 codex_exec",
        None,
        # The publisher replaced the prompt's text with this marker.
        "[REDACTED_PROMPT]",
    ),
    # Codex interactive CLI (the TUI), unredacted; a `ghost_snapshot` item.
    "codex/sessions/2025/11/17/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl": Expected(  # noqa: E501
        "codex",
        "019a93b9-f380-7600-98ff-940e6b99603c",
        "/home/user/projects/temp/chatbot-ui",
        "main",
        "envelope 0.58.0 codex_cli_rs",
        None,
        "finish up the users work by rigging up the chatbot-ui to use lmstudio instead of",
    ),
    # Codex IDE extension (VS Code), unredacted: the first request is wrapped in the editor's
    # context (`# Context from my IDE setup: ... ## My request for Codex:`), the second is bare.
    VSCODE: Expected(
        "codex",
        VSCODE_ID,
        "/Users/user/git/wakatime-cli",
        "master",
        "envelope 0.119.0-alpha.28 codex_vscode",
        None,
        "remove scrolling horizontally",
    ),
    # Codex desktop app, redacted by the publisher; images, a `compacted` line.
    DESKTOP_COMPACTED: Expected(
        "codex",
        "019c8a59-e9dd-71f0-9ae3-4079fe9726a9",
        "/redacted/path/59b923df4d",
        "main",
        "envelope 0.104.0-alpha.1 Codex Desktop",
        None,
        # The first request of the session; the compaction restates it, once only.
        "[REDACTED_TEXT len=32 sha=821fd802]",
    ),
    "codex/sessions/2026/02/23/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl": Expected(  # noqa: E501
        "codex",
        "019c8bfe-ec25-79e0-97d7-bda6a9c575ff",
        "/redacted/path/ea96e59ed9",
        "main",
        "envelope 0.104.0-alpha.1 Codex Desktop",
        None,
        "[REDACTED_TEXT len=98 sha=c002ff99]",
    ),
    # Hand-assembled by its publisher from many sessions' record shapes (values replaced by
    # "[trimmed for fixture]"), not one captured session: Codex 0.146 record types, `ordinal`,
    # six `compacted` lines, appended fork and sub-agent `session_meta` lines.
    "codex/sessions/2026/08/03/rollout-2026-08-03T10-48-56-019fc8be-3658-7ca3-9e29-000000000000.jsonl": Expected(  # noqa: E501
        "codex",
        "019fc8be-3658-7ca3-9e29-000000000000",
        "/tmp/repo",
        "main",
        "envelope 0.146.0 codex_cli_rs",
        None,
        "List the files\n[image]",
        other_cwds=("[trimmed for fixture]",),
    ),
    # The same publisher's Claude Code shape catalogue: `image` blocks in a user message and in
    # a queued command, and record types of Claude Code 2.1.80 to 2.1.220.
    "claude/projects/-tmp/ses_stage0_small.jsonl": Expected(
        "claude",
        "ses_stage0_small",
        "/tmp",
        "main",
        "2.1.80",
        None,
        "[image]",
        other_cwds=("[trimmed for fixture]",),
    ),
    "pi/agent/sessions/--tmp-agent-history-real-agent-pi-workspace--/"
    "2026-06-05T05-24-28-246Z_019e963d-6bd6-7ade-8a49-256ac3391bdd.jsonl": Expected(
        "openclaw",
        "019e963d-6bd6-7ade-8a49-256ac3391bdd",
        "/tmp/agent-history-real-agent/pi/workspace",
        None,
        "session v3",
        None,
        "[REDACTED_PROMPT]",
    ),
    "claude/projects/-tmp-agent-history-real-agent-claude-workspace/06090cb1-3e64-433a-bc7e-a621c0f596d2.jsonl": Expected(  # noqa: E501
        "claude",
        "06090cb1-3e64-433a-bc7e-a621c0f596d2",
        "/tmp/agent-history-real-agent/claude/workspace",
        "HEAD",
        "2.1.152",
        None,
        "[REDACTED_PROMPT]",
    ),
    "claude/projects/-path-to-Demo/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl": Expected(
        "claude",
        "fe5e1c67-53e7-4862-81ae-d0e013e3270b",
        "/path/to/Demo",
        None,
        "1.0.98",
        None,
        "/orchestrator create TODO app by Next.js",
        other_cwds=("/path/to/Demo/todo-app", "/path/to/Demo/todo-app/types"),
    ),
    "claude/projects/-path-to-Demo/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": Expected(
        "claude",
        "5c0375b4-57a5-4f26-b12d-d022ee4e51b7",
        "/path/to/Demo",
        "main",
        "1.0.108",
        None,
        "/orchestrator @CLAUDE.md を最新の状態にアップデートしてください",
    ),
    "claude/projects/-path-to-Demo/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl": Expected(
        "claude",
        "1af7fc5e-8455-4414-9ccd-011d40f70b2a",
        "/path/to/Demo",
        None,
        "1.0.98",
        None,
        "/init",
    ),
    "claude/projects/-home-marco-projects-spotter/491e126e-1e71-469c-ade2-fcc8af567c74.jsonl": Expected(  # noqa: E501
        "claude",
        "491e126e-1e71-469c-ade2-fcc8af567c74",
        "/home/marco/projects/spotter",
        "master",
        "2.1.38",
        None,
        "/handgemacht:create-beads websearch to learn how to fastest setup credo",
    ),
    "claude/projects/-home-marco-projects-spotter/d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl": Expected(  # noqa: E501
        "claude",
        "d6e0bada-1959-4eec-a9d2-0bfade768d8f",
        "/home/marco/projects/spotter",
        "master",
        "2.1.38",
        None,
        "start phoenix in background",
    ),
    f"{FUM}/{FUM_SESSION}.jsonl": Expected(
        "claude",
        FUM_SESSION,
        FUM_CWD,
        "spotter-fum",
        "2.1.39",
        None,
        "Work on bead spotter-fum. Run bd show spotter-fum",
        other_cwds=(FUM_CWD + "/assets",),
    ),
    f"{FUM}/{FUM_SESSION}/subagents/agent-a7be2f0.jsonl": Expected(
        "claude",
        f"{FUM_SESSION}.agent-a7be2f0",
        FUM_CWD,
        "spotter-fum",
        "2.1.39",
        FUM_SESSION,
        "How Spotter.Services.Tmux.list_panes/0 works",
    ),
    # Claude Code in VS Code (`<ide_opened_file>` before each request), two pasted images as
    # base64 blocks, and its first exchanges written a second time (new uuids, the original
    # timestamps) after Claude Code went from 2.1.22 to 2.1.29.
    f"{SESSION_SHARE}/47bf5f5c-9e11-4f51-8a29-7ad38ecdf17c.jsonl": Expected(
        "claude",
        "47bf5f5c-9e11-4f51-8a29-7ad38ecdf17c",
        "/Users/pete/git/moredip/session-share",
        "feature/handle-images",
        "2.1.22",
        None,
        "what's this an image of?",
    ),
    # The codemie-code developers' own sessions (Claude Code 2.0.76 and 2.1.4, the home folder
    # replaced by `/Users/user/repo` by the publisher): design talks with many corrections and
    # preferences in the user's words, `/clear`, a BMAD slash command, interruptions.
    f"{CODEMIE}/196820da-1026-4b6f-a513-a6aae42da1a6.jsonl": Expected(
        "claude",
        "196820da-1026-4b6f-a513-a6aae42da1a6",
        CODEMIE_CWD,
        "conversations",
        "2.0.76",
        None,
        "there is logic that tracks files in claude folder for sso conversation tracking",
    ),
    f"{CODEMIE}/3fe1b6bc-dbd0-4320-b980-4f147befa187.jsonl": Expected(
        "claude",
        "3fe1b6bc-dbd0-4320-b980-4f147befa187",
        CODEMIE_CWD,
        "codex",
        "2.0.76",
        None,
        "TODO is not acceptable, implementation must be full.",
    ),
    f"{CODEMIE}/624a4a58-b34c-462d-a70d-13421c8125a8.jsonl": Expected(
        "claude",
        "624a4a58-b34c-462d-a70d-13421c8125a8",
        CODEMIE_CWD,
        "conversations",
        "2.0.76",
        None,
        "performance is crucial. there is a need to track latest synced message id",
    ),
    f"{CODEMIE}/9eda1058-9706-484a-b992-d03f9cfa2546.jsonl": Expected(
        "claude",
        "9eda1058-9706-484a-b992-d03f9cfa2546",
        CODEMIE_CWD,
        "conversations",
        "2.1.4",
        None,
        "show tools and store response in file",
    ),
    # Codex TUI 0.125.0 (`originator: codex-tui`), unredacted but for the user's name.
    CODEMIE_TUI: Expected(
        "codex",
        CODEMIE_TUI_ID,
        "/Users/Sample_User/repos/codemie-ai/codemie-code",
        "feat/codex-agent-plugin",
        "envelope 0.125.0 codex-tui",
        None,
        "let's update the defailt context compart to 90 in env var",
    ),
    # Another codemie-code developer's sessions (Claude Code 2.0.73 to 2.0.76, unredacted):
    # short requests, an interruption, a bare slash command that expands to a long prompt.
    f"{CODEMIE_DEV}/5c187f31-7d9e-49c6-86b2-206d3023f675.jsonl": Expected(
        "claude",
        "5c187f31-7d9e-49c6-86b2-206d3023f675",
        CODEMIE_DEV_CWD,
        "main",
        "2.0.75",
        None,
        "analyze bedrock provider it configured correctly, but not working",
    ),
    f"{CODEMIE_DEV}/a1f75e0f-ecc5-4f62-be3d-336b8f0b3928.jsonl": Expected(
        "claude",
        "a1f75e0f-ecc5-4f62-be3d-336b8f0b3928",
        CODEMIE_DEV_CWD,
        "codex",
        "2.0.76",
        None,
        "it should be included into constant",
    ),
    f"{CODEMIE_DEV}/b68cb16e-c614-42d1-86fc-f0875d42724d.jsonl": Expected(
        "claude",
        "b68cb16e-c614-42d1-86fc-f0875d42724d",
        CODEMIE_DEV_CWD,
        "fix-multiplatform",
        "2.0.73",
        None,
        "analyze wether there is global error handling for agent start",
    ),
    f"{CODEMIE_DEV}/c3a574c5-3ba6-4307-b123-b48a5d021db8.jsonl": Expected(
        "claude",
        "c3a574c5-3ba6-4307-b123-b48a5d021db8",
        CODEMIE_DEV_CWD,
        "guide",
        "2.0.76",
        None,
        "/memory-refresh",
    ),
    # Codex desktop app 0.128.0-alpha.1: the requests only as the UI's `user_message` events,
    # the first wrapped in the files the user mentioned (a meeting transcript).
    CODEMIE_DESKTOP: Expected(
        "codex",
        CODEMIE_DESKTOP_ID,
        "/Users/Sample_User/naya",
        None,
        "envelope 0.128.0-alpha.1 Codex Desktop",
        None,
        "there is a need for nikita to draft demo scenario around governance",
    ),
    # Codex CLI 0.45.0 (`codex_cli_rs`), interactive over two days: thirteen requests adding
    # tests to a desktop app, `shell` calls whose output is a JSON string, `custom_tool_call`
    # items (`apply_patch`), and the git remote in `session_meta`.
    "codex/sessions/2025/10/06/"
    "rollout-2025-10-06T20-15-35-0199bb2a-4c23-76b1-bfb0-2d78295c0f29.jsonl": Expected(
        "codex",
        "0199bb2a-4c23-76b1-bfb0-2d78295c0f29",
        "/Users/cliftonc/work/guideai",
        "main",
        "envelope 0.45.0 codex_cli_rs",
        None,
        "I want to assess if the testing is any good?",
    ),
    # The entireio/cli developers' own sessions, kept by Entire in the repository's
    # `entire/checkpoints/v1` branch (Entire replaced what looked like secrets by
    # `[REDACTED]`): design talks, corrections of facts about the project, pasted output and
    # plans, preferences on tests; hook `progress` and `system` records.
    f"{SOPH}/63784323-7042-4ab8-82b1-3c0b79467bf9.jsonl": Expected(
        "claude",
        "63784323-7042-4ab8-82b1-3c0b79467bf9",
        SOPH_CWD,
        "soph/bug-with-rebase-or-commit-change-during-claude-session",
        "2.1.22",
        None,
        "We track the changed files in a checkpoint right, can we ultrathink if we could use this",
    ),
    f"{SOPH}/c26d2153-23c8-42ed-ab6c-808579b64e5b.jsonl": Expected(
        "claude",
        "c26d2153-23c8-42ed-ab6c-808579b64e5b",
        SOPH_CWD,
        "main",
        "2.1.12",
        None,
        "for manual-commits we use git hooks to also add the trailer to the commits",
    ),
    f"{SOPH}/839b35f7-4dbd-4d93-9772-3c272cc87caa.jsonl": Expected(
        "claude",
        "839b35f7-4dbd-4d93-9772-3c272cc87caa",
        SOPH_CWD,
        "feat/gemini-cli-agent",
        "2.1.14",
        None,
        "would 1 have helped in this scenario?",
    ),
    # The branch changes mid-way (`add-codeowners`, then `fix-resume-test-hanging`).
    "claude/projects/-Users-alex-workspace-cli/"
    "85cc202e-0e74-46ce-a485-e5fcd11f7a8c.jsonl": Expected(
        "claude",
        "85cc202e-0e74-46ce-a485-e5fcd11f7a8c",
        "/Users/alex/workspace/cli",
        "add-codeowners",
        "2.1.12",
        None,
        "can we talk about what we're doing first?",
    ),
    # Two worktrees of that developer: CI lint failing, tool calls the user rejected with a
    # question instead, MCP tool calls; and changes to `entire explain`, an amend gone wrong.
    "claude/projects/-Users-alex-workspace-cli-.worktrees-4/"
    "f022dad1-9896-4a6c-bb91-0d1efb580b70.jsonl": Expected(
        "claude",
        "f022dad1-9896-4a6c-bb91-0d1efb580b70",
        "/Users/alex/workspace/cli/.worktrees/4",
        "gtrrz-victor/restructure-entire-session-files",
        "2.1.31",
        None,
        "why is lint failing on the build?",
    ),
    "claude/projects/-Users-alex-workspace-cli-.worktrees-alex-test-explain-checkpoint-boundaries/"
    "ce99376e-9bff-467b-91ed-b5ae280c1917.jsonl": Expected(
        "claude",
        "ce99376e-9bff-467b-91ed-b5ae280c1917",
        "/Users/alex/workspace/cli/.worktrees/alex/test-explain-checkpoint-boundaries",
        "alex/explain-raw-transcript",
        "2.1.29",
        None,
        "Let's make some more changes to explain.",
    ),
    "claude/projects/-Users-paul-src-entireio-cli/"
    "768de5d6-9fad-475b-8a4f-dfa7ddc01bb0.jsonl": Expected(
        "claude",
        "768de5d6-9fad-475b-8a4f-dfa7ddc01bb0",
        "/Users/paul/src/entireio/cli",
        "20260206-secrets-redaction",
        "2.1.34",
        None,
        "i'd like to see literal expectations (either byte slices or strings) instead of",
    ),
    # A request interrupted and sent again, then a plan approved in plan mode.
    "claude/projects/-Users-gtrrz-victor-wks-cli/"
    "d64b50bb-125b-4b54-867a-e59841e553d8.jsonl": Expected(
        "claude",
        "d64b50bb-125b-4b54-867a-e59841e553d8",
        "/Users/gtrrz-victor/wks/cli",
        "gtrrz-victor/do-not-show-suggestions-if-cmd-fails",
        "2.1.12",
        None,
        "something like stripe-cli is doing about handling errors",
    ),
    # PackmindHub/context-evaluator's developer's own sessions, kept by Entire in the
    # repository's `entire/checkpoints/v1` branch: a plan approved in plan mode, then short
    # corrections and facts about the project; a pasted screenshot as a base64 `image` block.
    f"{PACKMIND}/40656dd9-ec9c-43e3-880e-b326d2153ff3.jsonl": Expected(
        "claude",
        "40656dd9-ec9c-43e3-880e-b326d2153ff3",
        PACKMIND_CWD,
        "main",
        "2.1.41",
        None,
        'for AGENTS.md target, the skills should be in ".agent/skills" directory',
    ),
    f"{PACKMIND}/5e1ab9a6-bf0e-4850-bd88-c2e45dea3d20.jsonl": Expected(
        "claude",
        "5e1ab9a6-bf0e-4850-bd88-c2e45dea3d20",
        PACKMIND_CWD,
        "main",
        "2.1.47",
        None,
        'We should not display "AGENTS.md" for GitHub Copilot instructions',
    ),
    f"{PACKMIND}/dbaea254-cab9-44ea-94ba-08b92be95cfd.jsonl": Expected(
        "claude",
        "dbaea254-cab9-44ea-94ba-08b92be95cfd",
        PACKMIND_CWD,
        "main",
        "2.1.45",
        None,
        "make the modal bigger and remove the button at the bottom right corner",
    ),
    # Published without its parent session: a sub-agent file whose parent is not on disk.
    "claude/projects/-home-USER-projects-spotter-worktrees-spotter-0rt/"
    f"{ORPHAN_PARENT}/subagents/agent-afc096d.jsonl": Expected(
        "claude",
        f"{ORPHAN_PARENT}.agent-afc096d",
        "/home/USER/projects/spotter-worktrees/spotter-0rt",
        "spotter-0rt",
        "2.1.38",
        ORPHAN_PARENT,
        "Explore the Elixir/Phoenix project structure",
    ),
}


# Claude Code's compaction agent: sent the session's conversation to summarise, its answer is
# the parent's compact summary. Kept in the corpus to show it is not read as a session.
COMPACTION_AGENT = f"{FUM}/{FUM_SESSION}/subagents/agent-acompact-f46190.jsonl"


def test_the_expectations_cover_every_corpus_file() -> None:
    on_disk = {str(path.relative_to(CORPUS)) for path in CORPUS.rglob("*.jsonl")}

    assert on_disk == set(EXPECTED) | {COMPACTION_AGENT}


@pytest.mark.parametrize("relative", sorted(EXPECTED))
def test_header_names_the_thread_its_provenance_and_format(relative: str) -> None:
    expected = EXPECTED[relative]

    header = read_header(CORPUS / relative)

    assert header.problem is None
    assert str(header.format) == expected.source
    assert header.thread_id == expected.thread_id
    assert header.cwd == expected.cwd
    assert header.git_branch == expected.git_branch
    assert header.format_version == expected.format_version
    assert header.parent_thread_id == expected.parent_thread_id


def test_every_file_reaches_stage_one_with_the_users_words_and_no_image_data(store: Store) -> None:
    report = scan(store, CORPUS, retry_budget=3)
    assert (report.new, report.bad, report.changed) == (len(EXPECTED), 0, 0)

    for relative, expected in EXPECTED.items():
        thread = store.threads.get_thread(expected.thread_id)
        assert thread is not None, relative
        assert thread.rollout_path == str(CORPUS / relative)
        assert (thread.format_version, thread.parent_thread_id) == (
            expected.format_version,
            expected.parent_thread_id,
        )
        rollout, read = build_input(thread, BUDGET_CHARS)
        assert read.problems == [], relative
        _assert_request_reaches(rollout, expected, relative)
        assert rollout.other_cwds == expected.other_cwds, relative
        for cwd in expected.other_cwds:
            assert cwd in rollout.transcript.splitlines()[0]
        # Source code may name base64; an inline data URL is image data.
        assert ";base64," not in rollout.transcript, relative
        assert not _BASE64_RUN.search(rollout.transcript), relative


def _assert_request_reaches(rollout: Stage1Input, expected: Expected, relative: str) -> None:
    delegated = expected.parent_thread_id is not None and not expected.own_requests
    kind = ItemKind.ASSISTANT if delegated else ItemKind.USER
    texts = [item.text for item in rollout.items if item.kind is kind]
    assert any(expected.request in text for text in texts), relative
    user_words = "\n".join(item.text for item in rollout.items if item.kind is ItemKind.USER)
    # Words Claude Code or the parent agent composed are never quoted as the user's.
    composed_texts = (
        "<task-notification>",
        "<command-name>",
        "[Request interrupted by user",
        "This session is being continued from a previous conversation",
    )
    for composed in composed_texts:
        assert composed not in user_words, relative
    if delegated:
        assert user_words == "", relative


def test_sub_agents_never_take_over_their_parents_thread(store: Store) -> None:
    scan(store, CORPUS, retry_budget=3)

    parent = store.threads.get_thread(FUM_SESSION)
    assert parent is not None
    assert parent.rollout_path == str(CORPUS / FUM / f"{FUM_SESSION}.jsonl")
    assert parent.parent_thread_id is None


def test_a_second_scan_finds_every_file_unchanged(store: Store) -> None:
    first = scan(store, CORPUS, retry_budget=3)
    second = scan(store, CORPUS, retry_budget=3)

    assert first.new == len(EXPECTED)
    assert (second.new, second.changed, second.bad, second.deleted) == (0, 0, 0, 0)
    assert second.unchanged == len(EXPECTED)


def test_status_counts_threads_per_format_version(store: Store) -> None:
    scan(store, CORPUS, retry_budget=3)

    formats = {(source, version): n for source, version, n in status_counts(store).formats}

    assert formats[("claude", "2.1.39")] == 2
    assert formats[("claude", "1.0.98")] == 2
    assert formats[("claude", "2.1.12")] == 3
    assert formats[("codex", "envelope 0.135.0 codex_exec")] == 2
    assert formats[("codex", "envelope 0.171.0 codex_exec")] == 3
    assert formats[("codex", "envelope 0.171.0 consolidator_capture")] == 2
    assert formats[("codex", "pre-envelope")] == 2
    assert sum(formats.values()) == len(EXPECTED)


def test_documented_formats_table_matches_the_corpus() -> None:
    """The session formats table lists exactly the (source, format version) pairs the corpus
    has."""
    text = FORMATS_DOC.read_text(encoding="utf-8")
    section = text.split("# Session formats", 1)[1].split("\n#", 1)[0]
    rows = {
        (cells[2].strip(), cells[3].strip().strip("`"))
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| agent")
        for cells in [line.split("|")]
        if cells[4].strip().startswith("corpus")
    }
    seen = {
        (str(header.format), header.format_version or "")
        for header in (read_header(CORPUS / relative) for relative in EXPECTED)
    }

    assert rows == seen


def test_the_agents_words_after_a_fix_are_not_said_of_the_failure(store: Store) -> None:
    """The FUM session's `git push` fails for want of an upstream and `--set-upstream` fixes
    it; the agent's last words come after, about a background task: "This is already
    superseded by our current state where all 157 tests pass and everything is pushed."
    """
    scan(store, CORPUS, retry_budget=3)
    thread = store.threads.get_thread(FUM_SESSION)
    assert thread is not None
    rollout, _ = build_input(thread, BUDGET_CHARS)

    notes = parse_raw_memory(ExtractiveBackend().extract(rollout).raw_memory)

    [push] = [failure for failure in notes.failures if failure.command == "git push 2>&1"]
    assert push.fix == "git push --set-upstream origin spotter-fum 2>&1"
    assert "superseded" not in push.explained
    assert push.explained == ""


@pytest.mark.parametrize(
    "relative",
    [
        f"{FUM}/{FUM_SESSION}.jsonl",
        "claude/projects/-home-marco-projects-spotter/d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl",
    ],
)
def test_temporary_files_are_not_files_touched(relative: str, store: Store) -> None:
    """Both sessions `tail` a background task's output under /tmp/claude-1000/."""
    scan(store, CORPUS, retry_budget=3)
    thread = store.threads.get_thread(EXPECTED[relative].thread_id)
    assert thread is not None
    rollout, _ = build_input(thread, BUDGET_CHARS)
    assert "/tmp/claude-1000/" in rollout.transcript

    notes = parse_raw_memory(ExtractiveBackend().extract(rollout).raw_memory)

    assert notes.files
    assert not [path for path in notes.files if path.startswith(("/tmp/", "/var/folders/"))]


def test_a_codex_compaction_quotes_no_request_twice_and_no_image_data(store: Store) -> None:
    """The `compacted` line restates earlier requests in its replacement history; 13 user
    messages carry an `input_image` (the publisher replaced the data URLs with markers)."""
    scan(store, CORPUS, retry_budget=3)
    thread = store.threads.get_thread(EXPECTED[DESKTOP_COMPACTED].thread_id)
    assert thread is not None

    rollout, _ = build_input(thread, BUDGET_CHARS)

    users = [item.text for item in rollout.items if item.kind is ItemKind.USER]
    assert users.count("[REDACTED_TEXT len=32 sha=821fd802]") == 1
    assert sum(text.count("[image]") for text in users) == 13
    assert "REDACTED_IMAGE_URL" not in rollout.transcript


def _users(store: Store, thread_id: str) -> list[str]:
    thread = store.threads.get_thread(thread_id)
    assert thread is not None
    rollout, read = build_input(thread, BUDGET_CHARS)
    assert read.problems == []
    return [item.text for item in rollout.items if item.kind is ItemKind.USER]


def test_a_codex_cli_compaction_summary_is_not_the_agents_words(store: Store) -> None:
    """Codex asks the model for a hand-off summary and records the answer as an assistant
    message (`metadata.compaction_output`), then the `compacted` line restating it."""
    summary = "The user fixes invoice totals that are off by a cent"
    lines = (CORPUS / CLI_COMPACTED).read_text(encoding="utf-8").splitlines()
    assert any('"compaction_output":true' in line and summary in line for line in lines)
    assert any('"type":"compacted"' in line for line in lines)
    scan(store, CORPUS, retry_budget=3)
    thread = store.threads.get_thread(COMPACTED_ID)
    assert thread is not None

    rollout, _ = build_input(thread, BUDGET_CHARS)

    assert summary not in rollout.transcript
    assert [(item.kind, item.text) for item in rollout.items] == [
        (ItemKind.USER, ROUNDING),
        (ItemKind.ASSISTANT, EXEC_ANSWER),
        (ItemKind.USER, "Add a test that pins the rounding of the sample invoice."),
        (
            ItemKind.ASSISTANT,
            "A test that sums the sample invoice's lines and expects 118.35 would pin it.",
        ),
    ]


@pytest.mark.parametrize(
    ("relative", "command", "output", "exit_code"),
    [
        (EXEC, '{"cmd":"cat invoice.py"}', "TOTAL_PLACES = 2\n", 0),
        (
            RESUMED_EXEC,
            '{"cmd":"cat tests/test_invoice.py"}',
            "cat: tests/test_invoice.py: No such file or directory\n",
            1,
        ),
        (PRE_ENVELOPE_25, '{"command":["cat","invoice.py"]}', "TOTAL_PLACES = 2\n", 0),
        (
            PRE_ENVELOPE_20,
            '{"command":["cat","missing.py"]}',
            "cat: missing.py: No such file or directory\n",
            1,
        ),
    ],
)
def test_a_codex_command_keeps_its_output_and_exit_code_in_every_era(
    relative: str, command: str, output: str, exit_code: int, store: Store
) -> None:
    """0.20 and 0.25 store the output as a JSON string with `metadata.exit_code`; 0.135 and
    0.171 as text headed by `Chunk ID` / `Wall time` / `Process exited with code N`."""
    scan(store, CORPUS, retry_budget=3)
    thread = store.threads.get_thread(EXPECTED[relative].thread_id)
    assert thread is not None

    rollout, _ = build_input(thread, BUDGET_CHARS)

    tools = [i for i in rollout.items if i.kind in (ItemKind.TOOL_CALL, ItemKind.TOOL_OUTPUT)]
    assert [(i.kind, i.text, i.exit_code) for i in tools] == [
        (ItemKind.TOOL_CALL, command, None),
        (ItemKind.TOOL_OUTPUT, output, exit_code),
    ]
    assert tools[0].call_id == tools[1].call_id is not None


def test_a_codex_exec_resume_appends_to_the_threads_own_file(store: Store) -> None:
    """Codex 0.171.0 resumed a session Codex 0.135.0 wrote: no second file, no second
    `session_meta`; the resumed turn's lines follow in the same file."""
    text = (CORPUS / RESUMED_EXEC).read_text(encoding="utf-8")
    assert text.count('"type":"session_meta"') == 1
    assert '"cli_version":"0.135.0"' in text and '"type":"world_state"' in text
    scan(store, CORPUS, retry_budget=3)
    thread = store.threads.get_thread(RESUMED_ID)
    assert thread is not None

    assert thread.rollout_path == str(CORPUS / RESUMED_EXEC)
    assert _users(store, RESUMED_ID) == [ROUNDING, "Should tax be rounded per line or per invoice?"]


def test_a_codex_fork_is_its_own_thread_linked_to_the_thread_it_was_forked_from(
    store: Store,
) -> None:
    """The fork's file holds only its own turns; its `history_base` refers to the parent's."""
    scan(store, CORPUS, retry_budget=3)
    fork = store.threads.get_thread(FORK_ID)
    assert fork is not None

    assert (fork.parent_thread_id, fork.rollout_path) == (EXEC_ID, str(CORPUS / FORK))
    assert _users(store, FORK_ID) == [EXPECTED[FORK].request]
    assert _users(store, EXEC_ID) == [ROUNDING]
    assert store.admin.forget_thread(EXEC_ID)
    assert store.threads.get_thread(FORK_ID) is None


def test_the_turns_after_a_codex_revert_are_a_linked_segment_of_the_thread(store: Store) -> None:
    """Codex keeps the reverted turn in the thread's file and writes the turns after the
    revert to `<thread>_<rollout>`; both are read, the segment linked to the thread."""
    report = scan(store, CORPUS, retry_budget=3)
    again = scan(store, CORPUS, retry_budget=3)
    segment = store.threads.get_thread(f"{REVERTED_ID}.segment-{AFTER_REVERT}")
    assert segment is not None

    assert (report.bad, again.changed, again.new) == (0, 0, 0)
    assert (segment.rollout_path, segment.parent_thread_id) == (
        str(CORPUS / AFTER_REVERT_FILE),
        REVERTED_ID,
    )
    assert _users(store, REVERTED_ID) == [
        ROUNDING,
        "Should tax be rounded per line or per invoice?",
    ]
    assert _users(store, segment.thread_id) == [EXPECTED[AFTER_REVERT_FILE].request]
    assert store.admin.forget_thread(REVERTED_ID)
    assert store.threads.get_thread(segment.thread_id) is None


def test_a_compaction_agent_transcript_is_not_a_second_thread(store: Store) -> None:
    """Its answer already reaches stage one as the parent's compact summary."""
    report = scan(store, CORPUS, retry_budget=3)
    parent = store.threads.get_thread(FUM_SESSION)
    assert parent is not None

    rollout, _ = build_input(parent, BUDGET_CHARS)

    assert report.new == len(EXPECTED)
    assert store.threads.get_thread(f"{FUM_SESSION}.agent-acompact-f46190") is None
    summary = "Enrich TranscriptRenderer with metadata, relative paths, thinking, and threading"
    assert summary in (CORPUS / COMPACTION_AGENT).read_text(encoding="utf-8")
    assert summary in rollout.transcript


def test_a_compaction_agent_thread_from_before_is_dropped_by_the_next_scan(
    store: Store,
) -> None:
    """A database that registered the compaction agent as a thread loses that duplicate."""
    store.threads.register_thread(
        read_header(CORPUS / COMPACTION_AGENT), ingested=False, retry_budget=3
    )

    report = scan(store, CORPUS, retry_budget=3)

    duplicate = store.threads.get_thread(f"{FUM_SESSION}.agent-acompact-f46190")
    assert (report.new, report.deleted) == (len(EXPECTED), 1)
    assert duplicate is not None and duplicate.state is ThreadState.DELETED


def test_a_claude_ide_session_quotes_each_request_once_without_the_editor_context(
    store: Store,
) -> None:
    scan(store, CORPUS, retry_budget=3)
    thread = store.threads.get_thread("47bf5f5c-9e11-4f51-8a29-7ad38ecdf17c")
    assert thread is not None

    rollout, _ = build_input(thread, BUDGET_CHARS)

    users = [item.text for item in rollout.items if item.kind is ItemKind.USER]
    assert users == [
        "[image]",
        "what's this an image of?",
        "what's the session iD?",
        "/publish-session",
    ]
    assert "ide_opened_file" not in rollout.transcript
    assert rollout.transcript.count("This is an image of a friendly robot icon") == 1


def test_a_codex_ide_session_quotes_the_requests_without_the_editor_context(store: Store) -> None:
    scan(store, CORPUS, retry_budget=3)
    thread = store.threads.get_thread(VSCODE_ID)
    assert thread is not None

    rollout, _ = build_input(thread, BUDGET_CHARS)

    users = [item.text for item in rollout.items if item.kind is ItemKind.USER]
    # The bare request is quoted as written (its trailing newline too); the wrapped one is the
    # text after `## My request for Codex:`.
    assert users == ["remove scrolling horizontally", "keep going\n"]
    for editor_context in ("Context from my IDE setup", "Active file", "Open tabs", "index.less:"):
        assert editor_context not in "\n".join(users)
    assert "Open tabs" not in rollout.transcript
    assert "Active file" not in rollout.transcript
    assert "I applied a more targeted fix." in rollout.transcript


# --- forgetting a session forgets its sub-agents ------------------------------------------------

FUM_AGENT = f"{FUM_SESSION}.agent-a7be2f0"
OTHER = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"


def _extract(store: Store, thread_id: str) -> None:
    claim = store.stage_one.try_claim_stage1(thread_id, lease_seconds=60)
    assert claim.claimed
    payload = Stage1Payload(
        raw_memory=f"learned in {thread_id}",
        rollout_summary=f"summary of {thread_id}",
        rollout_slug=None,
        backend="t",
        model="m",
    )
    assert store.stage_one.complete_stage1(claim, payload)


def _block(thread_id: str) -> Block:
    """A block whose one task and bullet cite only `thread_id`."""
    cited = ThreadCitation(thread_id, f"rollout_summaries/{thread_id}.md", "/w", "/r", "t")
    task = Task(f"t-{thread_id}", f"work in {thread_id}", (cited,))
    bullet = Bullet(f"fact from {thread_id}", (task.task_id,))
    return Block(f"b-{thread_id}", thread_id, "scope", "/w", "rule", (task,), knowledge=(bullet,))


def test_forgetting_a_session_forgets_its_sub_agents_in_every_version(store: Store) -> None:
    scan(store, CORPUS, retry_budget=3)
    for thread_id in (FUM_SESSION, FUM_AGENT, OTHER):
        _extract(store, thread_id)
    claim = store.phase_two.try_claim_phase2(lease_seconds=60)
    assert claim.claimed
    memory = Memory((_block(FUM_SESSION), _block(FUM_AGENT), _block(OTHER)))
    result = Phase2Result(encode(memory), "consolidation", 0, "t", "m")
    assert store.consolidation.commit_phase2(claim, result, cooldown_seconds=0).committed

    assert store.threads.linked_thread_ids(FUM_SESSION) == [FUM_AGENT]
    assert store.admin.forget_thread(FUM_SESSION)

    current = store.versions.current_version()
    assert current is not None and current.kind == "forget"
    assert FUM_AGENT not in current.content_md and FUM_SESSION not in current.content_md
    assert OTHER in current.content_md
    for version in store.versions.list_versions():
        assert FUM_SESSION not in version.memory_json, version.version
    assert (
        store.threads.get_thread(FUM_SESSION) is None
        and store.threads.get_thread(FUM_AGENT) is None
    )
    assert store.threads.is_forgotten(FUM_SESSION) and store.threads.is_forgotten(FUM_AGENT)
    assert store.threads.linked_thread_ids(FUM_SESSION) == []
    # The tombstones name no session, not even the parent through a link.
    assert not [row for row in store.threads.scan_index().values() if FUM_SESSION in str(row)]

    again = scan(store, CORPUS, retry_budget=3)

    assert (again.new, again.changed) == (0, 0)
    assert store.threads.get_thread(FUM_AGENT) is None


def test_a_sub_agent_met_after_its_session_was_forgotten_stays_forgotten(
    tmp_path: Path, store: Store
) -> None:
    session = CORPUS / FUM / f"{FUM_SESSION}.jsonl"
    copy = tmp_path / "projects" / "p"
    copy.mkdir(parents=True)
    shutil.copy(session, copy / session.name)
    scan(store, tmp_path, retry_budget=3)
    assert store.admin.forget_thread(FUM_SESSION)
    shutil.copytree(CORPUS / FUM / FUM_SESSION, copy / FUM_SESSION)

    report = scan(store, tmp_path, retry_budget=3)

    assert report.new == 0
    assert store.threads.get_thread(FUM_AGENT) is None


def test_forgetting_the_absent_parent_of_a_sub_agent_forgets_the_sub_agent(store: Store) -> None:
    scan(store, CORPUS, retry_budget=3)

    assert store.admin.forget_thread(ORPHAN_PARENT)

    assert store.threads.get_thread(f"{ORPHAN_PARENT}.agent-afc096d") is None
    assert store.threads.is_forgotten(f"{ORPHAN_PARENT}.agent-afc096d")
    assert not store.admin.forget_thread(ORPHAN_PARENT)


# --- bad input inside real formats ------------------------------------------------------------


def test_a_sub_agent_without_its_parent_is_a_linked_thread_of_its_own(store: Store) -> None:
    scan(store, CORPUS, retry_budget=3)

    orphan = store.threads.get_thread(f"{ORPHAN_PARENT}.agent-afc096d")

    assert store.threads.get_thread(ORPHAN_PARENT) is None
    assert orphan is not None and orphan.problem is None
    assert orphan.parent_thread_id == ORPHAN_PARENT


def test_a_truncated_last_line_costs_only_that_line(tmp_path: Path, store: Store) -> None:
    source = CORPUS / f"{FUM}/{FUM_SESSION}.jsonl"
    copy = tmp_path / "projects" / "p" / source.name
    copy.parent.mkdir(parents=True)
    data = source.read_bytes()
    copy.write_bytes(data[: len(data) - 40])

    report = scan(store, tmp_path, retry_budget=3)
    thread = store.threads.get_thread(FUM_SESSION)
    assert thread is not None
    rollout, read = build_input(thread, BUDGET_CHARS)

    last_line = data.count(b"\n")
    assert report.new == 1 and report.bad == 0
    assert read.problems == [
        f"line {last_line}: truncated last line (no newline, not valid JSON); skipped"
    ]
    users = [item.text for item in rollout.items if item.kind is ItemKind.USER]
    assert any("Work on bead spotter-fum" in text for text in users)


def test_the_first_cwd_wins_and_the_later_ones_are_listed(store: Store) -> None:
    scan(store, CORPUS, retry_budget=3)
    thread = store.threads.get_thread("fe5e1c67-53e7-4862-81ae-d0e013e3270b")
    assert thread is not None

    rollout, _ = build_input(thread, BUDGET_CHARS)

    assert thread.cwd == "/path/to/Demo"
    assert rollout.transcript.splitlines()[0] == (
        "[context] the session also worked in: /path/to/Demo/todo-app, /path/to/Demo/todo-app/types"
    )


def test_copies_of_the_corpus_elsewhere_are_read_alike(tmp_path: Path) -> None:
    """Identity comes from the files, not from where the corpus happens to live."""
    shutil.copytree(CORPUS, tmp_path / "copy")
    for relative, expected in EXPECTED.items():
        assert read_header(tmp_path / "copy" / relative).thread_id == expected.thread_id


# --- edge cases the corpus does not hold (see SOURCES.md) ---------------------------------------
# Lines written here in the shapes the agents document; they are not real sessions.


def _write_lines(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


LEGACY_ID = "3f2a9c1e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"


def test_a_pre_envelope_codex_rollout_takes_its_cwd_from_the_environment_context(
    tmp_path: Path, store: Store
) -> None:
    _write_lines(
        tmp_path / f"2025/08/13/rollout-2025-08-13T10-00-00-{LEGACY_ID}.jsonl",
        f'{{"id":"{LEGACY_ID}","timestamp":"2025-08-13T10:00:00.000Z","instructions":null,'
        '"git":{"commit_hash":"abc","branch":"feature/x","repository_url":"git@h:o/r.git"}}',
        '{"record_type":"state"}',
        '{"type":"message","id":null,"role":"user","content":[{"type":"input_text",'
        '"text":"<environment_context>\\n  <cwd>/Users/dev/shop</cwd>\\n  '
        '<approval_policy>on-request</approval_policy>\\n</environment_context>"}]}',
        '{"type":"message","id":null,"role":"user","content":[{"type":"input_text",'
        '"text":"make checkout tests pass"}]}',
        '{"record_type":"state"}',
    )

    scan(store, tmp_path, retry_budget=3)
    thread = store.threads.get_thread(LEGACY_ID)
    assert thread is not None
    rollout, _ = build_input(thread, BUDGET_CHARS)

    assert (thread.cwd, thread.git_branch, thread.format_version) == (
        "/Users/dev/shop",
        "feature/x",
        "pre-envelope",
    )
    assert [i.text for i in rollout.items if i.kind is ItemKind.USER] == [
        "make checkout tests pass"
    ]


def _ide_rollout(tmp_path: Path, request: str) -> Path:
    wrapped = (
        "# Context from my IDE setup:\\n\\n## Active file: src/cart.ts\\n\\n"
        "## Open tabs:\\n- cart.ts: src/cart.ts\\n- SECRET_NOTES.md: SECRET_NOTES.md\\n\\n"
        f"## My request for Codex:\\n{request}"
    )
    return _write_lines(
        tmp_path / f"2026/01/25/rollout-2026-01-25T21-53-48-{LEGACY_ID}.jsonl",
        '{"timestamp":"2026-01-25T21:53:48.000Z","type":"session_meta","payload":{'
        f'"id":"{LEGACY_ID}","timestamp":"2026-01-25T21:53:48.000Z","cwd":"/w/shop",'
        '"originator":"codex_vscode","cli_version":"0.89.0","source":"vscode"}}',
        '{"timestamp":"2026-01-25T21:53:49.000Z","type":"response_item","payload":{'
        '"type":"message","role":"user","content":[{"type":"input_text",'
        f'"text":"{wrapped}"}}]}}}}',
    )


def test_the_ide_wrapper_yields_the_request_not_the_open_tabs(tmp_path: Path, store: Store) -> None:
    _ide_rollout(tmp_path, "fix the rounding in the cart total")
    scan(store, tmp_path, retry_budget=3)
    thread = store.threads.get_thread(LEGACY_ID)
    assert thread is not None

    rollout, _ = build_input(thread, BUDGET_CHARS)

    assert thread.format_version == "envelope 0.89.0 codex_vscode"
    assert [i.text for i in rollout.items if i.kind is ItemKind.USER] == [
        "fix the rounding in the cart total"
    ]
    assert "SECRET_NOTES" not in rollout.transcript


def test_an_empty_ide_wrapped_request_quotes_nothing(tmp_path: Path, store: Store) -> None:
    _ide_rollout(tmp_path, "")
    scan(store, tmp_path, retry_budget=3)
    thread = store.threads.get_thread(LEGACY_ID)
    assert thread is not None

    rollout, read = build_input(thread, BUDGET_CHARS)

    assert read.problems == []
    assert [i for i in rollout.items if i.kind is ItemKind.USER] == []
    assert "Open tabs" not in rollout.transcript


CLAUDE_ID = "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"


@pytest.mark.parametrize(
    ("typed", "quoted"),
    [("rename this constant", ["rename this constant"]), ("", [])],
)
def test_an_ide_selection_sharing_a_block_with_the_request_is_not_quoted(
    typed: str, quoted: list[str], tmp_path: Path, store: Store
) -> None:
    selection = (
        "<ide_selection>The user selected the lines 3 to 3 from /w/app/settings.py:\\n"
        "API_TOKEN_NAME = 1\\n\\nThis may or may not be related to the current task."
        "</ide_selection>"
    )
    _write_lines(
        tmp_path / f"projects/-w-app/{CLAUDE_ID}.jsonl",
        f'{{"type":"user","sessionId":"{CLAUDE_ID}","cwd":"/w/app","version":"2.1.40",'
        '"timestamp":"2026-03-01T10:00:00.000Z","message":{"role":"user","content":['
        f'{{"type":"text","text":"{selection}{typed}"}}]}}}}',
    )
    scan(store, tmp_path, retry_budget=3)
    thread = store.threads.get_thread(CLAUDE_ID)
    assert thread is not None

    rollout, read = build_input(thread, BUDGET_CHARS)

    assert read.problems == []
    assert [i.text for i in rollout.items if i.kind is ItemKind.USER] == quoted
    assert "API_TOKEN_NAME" not in rollout.transcript


OPENCLAW_ID = "7d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"


def test_an_openclaw_session_keeps_tools_and_drops_images_thinking_and_compaction(
    tmp_path: Path, store: Store
) -> None:
    _write_lines(
        tmp_path / f"agents/main/sessions/{OPENCLAW_ID}.jsonl",
        f'{{"type":"session","version":3,"id":"{OPENCLAW_ID}",'
        '"timestamp":"2026-04-08T01:03:43.107Z","cwd":"/Users/dev/.openclaw/workspace"}',
        '{"type":"model_change","id":"a1","parentId":null,"timestamp":"2026-04-08T01:03:43.116Z",'
        '"provider":"p","modelId":"m"}',
        '{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-04-08T01:04:00.000Z",'
        '"message":{"role":"user","content":[{"type":"text","text":"why does the build fail?"},'
        '{"type":"image","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==","mimeType":"image/png"}]}}',
        '{"type":"message","id":"a3","parentId":"a2","timestamp":"2026-04-08T01:04:05.000Z",'
        '"message":{"role":"assistant","content":[{"type":"thinking","thinking":"look at logs"},'
        '{"type":"toolCall","id":"call_1","name":"bash","arguments":{"command":"make"}}]}}',
        '{"type":"message","id":"a4","parentId":"a3","timestamp":"2026-04-08T01:04:09.000Z",'
        '"message":{"role":"toolResult","toolCallId":"call_1","toolName":"bash",'
        '"content":[{"type":"text","text":"make: *** [all] Error 2"}],"isError":true}}',
        '{"type":"compaction","id":"a5","parentId":"a4","timestamp":"2026-04-08T01:05:00.000Z",'
        '"summary":"earlier: the user asked about the build","firstKeptEntryId":"a2"}',
    )

    scan(store, tmp_path, retry_budget=3)
    thread = store.threads.get_thread(OPENCLAW_ID)
    assert thread is not None
    rollout, read = build_input(thread, BUDGET_CHARS)

    assert (thread.source, thread.cwd, thread.format_version) == (
        "openclaw",
        "/Users/dev/.openclaw/workspace",
        "session v3",
    )
    assert read.problems == []
    assert [(i.kind, i.text, i.call_id, i.exit_code) for i in rollout.items] == [
        (ItemKind.USER, "why does the build fail?\n[image]", None, None),
        (ItemKind.TOOL_CALL, '{"command": "make"}', "call_1", None),
        (ItemKind.TOOL_OUTPUT, "make: *** [all] Error 2", "call_1", 1),
    ]
    assert "iVBORw0KGgo" not in rollout.transcript


def test_a_claude_file_is_the_session_it_is_named_after(tmp_path: Path) -> None:
    """A resumed session's file may open with records of the session it continues."""
    source = CORPUS / "claude/projects/-path-to-Demo/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    resumed = tmp_path / "projects" / "p" / "0b7c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3.jsonl"
    resumed.parent.mkdir(parents=True)
    shutil.copy(source, resumed)

    header = read_header(resumed)

    assert header.thread_id == "0b7c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3"
    assert read_header(source).thread_id == "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"


RESUMED = "019f1111-2222-7333-8444-555566667777"
SEGMENT = "019f1111-9999-7aaa-8bbb-cccc00001111"


def _codex_turn(path: Path, started: str, request: str, *, history_base: bool) -> Path:
    base = f',"history_base":{{"thread_id":"{RESUMED}"}}' if history_base else ""
    return _write_lines(
        path,
        f'{{"timestamp":"{started}","type":"session_meta","payload":{{"id":"{RESUMED}",'
        f'"timestamp":"{started}","cwd":"/w/shop","originator":"codex_cli_rs",'
        f'"cli_version":"0.153.4","source":"cli"{base}}}}}',
        f'{{"timestamp":"{started}","type":"response_item","payload":{{"type":"message",'
        f'"role":"user","content":[{{"type":"input_text","text":"{request}"}}]}}}}',
    )


def test_a_resumed_codex_threads_later_segment_is_a_linked_thread_of_its_own(
    tmp_path: Path, store: Store
) -> None:
    """A thread continued in a new file (after a revert, see the captured pair, or when an older
    thread moved to paginated history; a plain resume appends) is written as
    `rollout-<time>-<thread>_<rollout>.jsonl` with the thread's id in its `session_meta`: it
    must not take the thread over from the file the thread started in."""
    first = _codex_turn(
        tmp_path / f"2026/08/20/rollout-2026-08-20T09-00-00-{RESUMED}.jsonl",
        "2026-08-20T09:00:00.000Z",
        "add the checkout page",
        history_base=False,
    )
    later = _codex_turn(
        tmp_path / f"2026/08/21/rollout-2026-08-21T10-00-00-{RESUMED}_{SEGMENT}.jsonl",
        "2026-08-21T10:00:00.000Z",
        "now the refund flow",
        history_base=True,
    )

    report = scan(store, tmp_path, retry_budget=3)
    again = scan(store, tmp_path, retry_budget=3)

    thread, segment = (
        store.threads.get_thread(RESUMED),
        store.threads.get_thread(f"{RESUMED}.segment-{SEGMENT}"),
    )
    assert thread is not None and segment is not None
    assert (report.new, again.unchanged, again.changed) == (2, 2, 0)
    assert (thread.rollout_path, thread.parent_thread_id) == (str(first), None)
    assert (segment.rollout_path, segment.parent_thread_id) == (str(later), RESUMED)
    for record, request in ((thread, "add the checkout page"), (segment, "now the refund flow")):
        rollout, _ = build_input(record, BUDGET_CHARS)
        assert [i.text for i in rollout.items if i.kind is ItemKind.USER] == [request]
    assert store.admin.forget_thread(RESUMED)
    assert store.threads.get_thread(f"{RESUMED}.segment-{SEGMENT}") is None


def test_a_codex_sub_agent_rollout_links_to_the_thread_that_spawned_it(tmp_path: Path) -> None:
    child = "019a0000-0000-7000-8000-0000000000a3"
    parent = "019a0000-0000-7000-8000-0000000000a2"
    path = _write_lines(
        tmp_path / f"2026/08/10/rollout-2026-08-10T14-05-00-{child}.jsonl",
        '{"timestamp":"2026-08-10T14:05:00.000Z","type":"session_meta","payload":{'
        f'"id":"{child}","timestamp":"2026-08-10T14:05:00.000Z","cwd":"/w/app",'
        '"originator":"codex_exec","cli_version":"0.160.0","source":{"subagent":{'
        f'"thread_spawn":{{"parent_thread_id":"{parent}","depth":1}}}}}}}}}}',
    )

    header = read_header(path)

    assert (header.thread_id, header.parent_thread_id) == (child, parent)
    assert header.format_version == "envelope 0.160.0 codex_exec"
