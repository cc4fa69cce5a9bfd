"""The real published sessions of `tests/fixtures/real`, copied into the quality run.

Each is listed with the thread it is (its session id, a sub-agent's `<session>.agent-<id>`, a
Codex revert segment's `<thread>.segment-<rollout>`), its cwd as the file gives it, and whether
it carries user text a person (or a delegating agent) wrote and anyone can read: redacted
prompts and files hand-assembled from record shapes do not. Q11 expects every session with
user text to be represented in memory by at least a task. Judged by hand from the files; see
`tests/fixtures/real/SOURCES.md` for where each comes from.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "real"
SHOP = "/tmp/codex-capture/work/shop-api"
FUM = "/home/USER/projects/spotter-worktrees/spotter-fum"
FUM_SESSION = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
DEMO = "/path/to/Demo"
SPOTTER = "/home/marco/projects/spotter"
CODEMIE = "/Users/user/repo"
CODEMIE_DEV = "/Users/Nikita_Levyankov/repos/EPMCDME/codemie-ai/codemie-code"
SOPH = "/Users/soph/Work/entire/devenv/cli"
PACKMIND = "/Users/cedricteyton/Code/agents-md-evaluator"


@dataclass(frozen=True)
class RealSession:
    thread_id: str
    cwd: str | None
    user_text: bool
    what: str


REAL_SESSIONS = (
    RealSession("01a23161-44f7-7962-93cb-148d826673f1", SHOP, True, "codex exec, rounding"),
    RealSession("01a23161-4812-7d71-995f-3012a0dd3306", SHOP, True, "codex exec fork"),
    RealSession("01a23161-4dfc-7bb2-a3b9-a47825b3888d", SHOP, True, "codex exec resumed"),
    RealSession("01a23161-5997-7253-b510-0a77f65e20fb", SHOP, True, "codex CLI compaction"),
    RealSession("01a23167-3a4d-71b0-8ec2-3e7428bad6a3", SHOP, True, "codex app-server revert"),
    RealSession(
        "01a23167-3a4d-71b0-8ec2-3e7428bad6a3.segment-01a23167-3b36-7463-8531-3c8ad77a12d9",
        SHOP,
        True,
        "the turn after the revert",
    ),
    RealSession("abe798b0-5650-427c-a584-0aad42833cba", SHOP, True, "codex 0.25 pre-envelope"),
    RealSession("7f0f032c-3a92-4cc6-b7dc-654f2f6bbefe", None, True, "codex 0.20, no cwd"),
    RealSession(
        "019a93b9-f380-7600-98ff-940e6b99603c",
        "/home/user/projects/temp/chatbot-ui",
        True,
        "codex CLI: chatbot-ui to LM Studio",
    ),
    RealSession(
        "019d9353-333c-7c41-a909-26f5c6221a5a",
        "/Users/user/git/wakatime-cli",
        True,
        "codex IDE: remove horizontal scrolling",
    ),
    RealSession(
        "019e9625-802f-7e91-840a-cfe88d14117a",
        "/tmp/agent-history-real-agent/codex/workspace",
        False,
        "codex exec, prompt redacted",
    ),
    RealSession(
        "019c8a59-e9dd-71f0-9ae3-4079fe9726a9", "/redacted/path/59b923df4d", False, "redacted"
    ),
    RealSession(
        "019c8bfe-ec25-79e0-97d7-bda6a9c575ff", "/redacted/path/ea96e59ed9", False, "redacted"
    ),
    RealSession("019fc8be-3658-7ca3-9e29-000000000000", "/tmp/repo", False, "hand-assembled"),
    RealSession("ses_stage0_small", "/tmp", False, "hand-assembled"),
    RealSession(
        "019e963d-6bd6-7ade-8a49-256ac3391bdd",
        "/tmp/agent-history-real-agent/pi/workspace",
        False,
        "pi, prompt redacted",
    ),
    RealSession(
        "06090cb1-3e64-433a-bc7e-a621c0f596d2",
        "/tmp/agent-history-real-agent/claude/workspace",
        False,
        "claude, prompt redacted",
    ),
    RealSession("fe5e1c67-53e7-4862-81ae-d0e013e3270b", DEMO, True, "/orchestrator TODO app"),
    RealSession("5c0375b4-57a5-4f26-b12d-d022ee4e51b7", DEMO, True, "/orchestrator CLAUDE.md"),
    RealSession("1af7fc5e-8455-4414-9ccd-011d40f70b2a", DEMO, True, "/init"),
    RealSession("491e126e-1e71-469c-ade2-fcc8af567c74", SPOTTER, True, "create beads"),
    RealSession("d6e0bada-1959-4eec-a9d2-0bfade768d8f", SPOTTER, True, "start phoenix"),
    RealSession(FUM_SESSION, FUM, True, "work on bead spotter-fum"),
    RealSession(f"{FUM_SESSION}.agent-a7be2f0", FUM, True, "sub-agent: how tmux panes work"),
    RealSession(
        "47bf5f5c-9e11-4f51-8a29-7ad38ecdf17c",
        "/Users/pete/git/moredip/session-share",
        True,
        "claude in VS Code: image, session id",
    ),
    RealSession("196820da-1026-4b6f-a513-a6aae42da1a6", CODEMIE, True, "track /clear: design"),
    RealSession("3fe1b6bc-dbd0-4320-b980-4f147befa187", CODEMIE, True, "codex metrics plugin"),
    RealSession("624a4a58-b34c-462d-a70d-13421c8125a8", CODEMIE, True, "incremental sync"),
    RealSession("9eda1058-9706-484a-b992-d03f9cfa2546", CODEMIE, True, "show tools, explore"),
    RealSession(
        "019e1625-789d-76c0-80ab-3724b5ddb799",
        "/Users/Sample_User/repos/codemie-ai/codemie-code",
        True,
        "codex TUI: context compaction setting",
    ),
    RealSession(
        "0199bb2a-4c23-76b1-bfb0-2d78295c0f29",
        "/Users/cliftonc/work/guideai",
        True,
        "codex CLI 0.45: desktop app tests",
    ),
    RealSession("5c187f31-7d9e-49c6-86b2-206d3023f675", CODEMIE_DEV, True, "bedrock provider"),
    RealSession("a1f75e0f-ecc5-4f62-be3d-336b8f0b3928", CODEMIE_DEV, True, "llm_models endpoint"),
    RealSession("b68cb16e-c614-42d1-86fc-f0875d42724d", CODEMIE_DEV, True, "error metrics, commit"),
    RealSession("c3a574c5-3ba6-4307-b123-b48a5d021db8", CODEMIE_DEV, True, "/memory-refresh"),
    RealSession(
        "019e1695-0522-7c83-8b39-0dd379793f80",
        "/Users/Sample_User/naya",
        True,
        "codex desktop: demo preparation",
    ),
    RealSession("63784323-7042-4ab8-82b1-3c0b79467bf9", SOPH, True, "entire: shadow branches"),
    RealSession("c26d2153-23c8-42ed-ab6c-808579b64e5b", SOPH, True, "entire: checkpoint ids doc"),
    RealSession("839b35f7-4dbd-4d93-9772-3c272cc87caa", SOPH, True, "entire: sessions left over"),
    RealSession(
        "85cc202e-0e74-46ce-a485-e5fcd11f7a8c",
        "/Users/alex/workspace/cli",
        True,
        "entire: a resume test that hangs",
    ),
    RealSession(
        "f022dad1-9896-4a6c-bb91-0d1efb580b70",
        "/Users/alex/workspace/cli/.worktrees/4",
        True,
        "entire: why lint fails on CI",
    ),
    RealSession(
        "ce99376e-9bff-467b-91ed-b5ae280c1917",
        "/Users/alex/workspace/cli/.worktrees/alex/test-explain-checkpoint-boundaries",
        True,
        "entire: explain --raw-transcript, an amend",
    ),
    RealSession(
        "768de5d6-9fad-475b-8a4f-dfa7ddc01bb0",
        "/Users/paul/src/entireio/cli",
        True,
        "entire: literal test expectations",
    ),
    RealSession(
        "d64b50bb-125b-4b54-867a-e59841e553d8",
        "/Users/gtrrz-victor/wks/cli",
        True,
        "entire: stripe-cli style errors",
    ),
    RealSession(
        "40656dd9-ec9c-43e3-880e-b326d2153ff3", PACKMIND, True, "packmind: skills directory"
    ),
    RealSession("5e1ab9a6-bf0e-4850-bd88-c2e45dea3d20", PACKMIND, True, "packmind: copilot label"),
    RealSession(
        "dbaea254-cab9-44ea-94ba-08b92be95cfd", PACKMIND, True, "packmind: product tour modal"
    ),
    RealSession(
        "6c2214d7-b87e-4432-8e41-22ba294ea584.agent-afc096d",
        "/home/USER/projects/spotter-worktrees/spotter-0rt",
        True,
        "sub-agent without its parent: explore the project",
    ),
)


def copy_real_sessions(sessions: Path) -> Path:
    """The real files, laid out as the agents write them, under `sessions/real`."""
    target = sessions / "real"
    for agent in ("codex", "claude", "pi"):
        shutil.copytree(ROOT / agent, target / agent, dirs_exist_ok=True)
    return target
