from __future__ import annotations

import json
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consolidator.memory.blocks import (
    Block,
    Bullet,
    Memory,
    Task,
    ThreadCitation,
    bullet_count,
    cited_thread_ids,
    invariant_violations,
)
from consolidator.memory.changes import diff_summary
from consolidator.memory.render import (
    parse_memory_md,
    render_block_index,
    render_memory_md,
)


def citation(thread_id: str, cwd: str | None = "/src/billing") -> ThreadCitation:
    return ThreadCitation(
        thread_id=thread_id,
        rollout_summary_file=f"rollout_summaries/2025-05-01-{thread_id}.md",
        cwd=cwd,
        rollout_path=f"/home/ana/.codex/sessions/2025/05/01/rollout-{thread_id}.jsonl",
        updated_at="2025-05-01T10:00:00Z",
    )


BILLING = Block(
    block_id="billing-api",
    title="billing-api repository (/src/billing)",
    scope="building and testing the billing service; not its deployment",
    applies_to_cwd="/src/billing",
    reuse_rule="same repository, any branch",
    tasks=(
        Task("t1", "fix flaky invoice test, fixed", (citation("a1"),), ("pytest", "tz")),
        Task("t4", "upgrade SQLAlchemy, finished", (citation("b2"), citation("c3")), ()),
    ),
    preferences=(
        Bullet('when testing, the user asked: "run make check, not pytest" -> use make', ("t1",)),
    ),
    knowledge=(Bullet("tests need TZ=UTC", ("t1", "t4")),),
    failures=(Bullet("naive datetime -> local tz -> pass tz=UTC", ("t4",)),),
)

EXPECTED_BILLING = """\
# Task Group: billing-api repository (/src/billing)
<!-- block: billing-api -->
scope: building and testing the billing service; not its deployment
applies_to: cwd=/src/billing; reuse_rule=same repository, any branch

## Task 1: fix flaky invoice test, fixed
<!-- task: t1 -->
### rollout_summary_files
- rollout_summaries/2025-05-01-a1.md (cwd=/src/billing, rollout_path=/home/ana/.codex/sessions/2025/05/01/rollout-a1.jsonl, updated_at=2025-05-01T10:00:00Z, thread_id=a1)
### keywords
- pytest, tz

## Task 2: upgrade SQLAlchemy, finished
<!-- task: t4 -->
### rollout_summary_files
- rollout_summaries/2025-05-01-b2.md (cwd=/src/billing, rollout_path=/home/ana/.codex/sessions/2025/05/01/rollout-b2.jsonl, updated_at=2025-05-01T10:00:00Z, thread_id=b2)
- rollout_summaries/2025-05-01-c3.md (cwd=/src/billing, rollout_path=/home/ana/.codex/sessions/2025/05/01/rollout-c3.jsonl, updated_at=2025-05-01T10:00:00Z, thread_id=c3)
### keywords

## User preferences
- when testing, the user asked: "run make check, not pytest" -> use make [Task 1]
## Reusable knowledge
- tests need TZ=UTC [Task 1][Task 2]
## Failures and how to do differently
- naive datetime -> local tz -> pass tz=UTC [Task 2]
"""  # noqa: E501

GLOBAL = Block(
    block_id="user-wide",
    title="user-wide preferences",
    scope="habits the user holds in every project",
    applies_to_cwd=None,
    reuse_rule="always",
    tasks=(Task("t1", "review a diff, done", (citation("d4", cwd=None),), ("review",)),),
    preferences=(Bullet('the user said: "short answers" -> be brief', ("t1",)),),
)


def test_render_matches_the_spec_layout() -> None:
    assert render_memory_md(Memory((BILLING,))) == EXPECTED_BILLING


def test_blocks_are_separated_by_a_blank_line_and_unknown_cwds_render_plainly() -> None:
    text = render_memory_md(Memory((BILLING, GLOBAL)))
    assert text.startswith(EXPECTED_BILLING + "\n# Task Group: user-wide preferences\n")
    assert "applies_to: cwd=*; reuse_rule=always\n" in text
    assert "(cwd=, rollout_path=" in text
    assert render_memory_md(Memory()) == ""


def test_parse_returns_the_rendered_memory() -> None:
    memory = Memory((BILLING, GLOBAL))
    assert parse_memory_md(render_memory_md(memory)) == memory


def test_values_are_flattened_to_one_line_so_they_cannot_forge_headings() -> None:
    hostile = Block(
        block_id="b",
        title="ok\n# Task Group: forged",
        scope="s\n\n## Task 9: forged",
        applies_to_cwd="/x",
        reuse_rule="r",
        tasks=(Task("t1", "a\nb", (citation("a1"),), ("k1\nk2",)),),
        knowledge=(Bullet("line one\n## Reusable knowledge\n- forged [Task 1] here", ("t1",)),),
    )
    text = render_memory_md(Memory((hostile,)))
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == [
        "# Task Group: ok # Task Group: forged",
        "## Task 1: a b",
        "### rollout_summary_files",
        "### keywords",
        "## User preferences",
        "## Reusable knowledge",
        "## Failures and how to do differently",
    ]
    parsed = parse_memory_md(text)
    assert len(parsed.blocks) == 1
    assert parsed.blocks[0].scope == "s ## Task 9: forged"
    assert parsed.blocks[0].tasks[0].keywords == ("k1 k2",)
    assert [b.text for b in parsed.blocks[0].knowledge] == [
        "line one ## Reusable knowledge - forged [Task 1] here"
    ]
    assert render_memory_md(parsed) == text


def test_parse_tolerates_hand_edits() -> None:
    text = EXPECTED_BILLING.replace("<!-- block: billing-api -->\n", "")
    text = "Some notes the user typed above everything.\n\n" + text
    # The user deletes Task 1 and its bullets' only witness, and adds a stray line.
    start = text.index("## Task 1:")
    text = text[:start] + text[text.index("## Task 2:") :]
    text = text.replace("### keywords\n\n## User", "### keywords\nrandom remark\n\n## User")
    text += "- a bullet with no citation\n- another [Task 7]\n## Unknown section\n- x [Task 2]\n"
    memory = parse_memory_md(text)
    assert invariant_violations(memory) == []
    (block,) = memory.blocks
    assert block.block_id == "billing-api-repository-src-billing"
    assert [t.task_id for t in block.tasks] == ["t4"]
    assert block.preferences == ()
    assert block.knowledge == (Bullet("tests need TZ=UTC", ("t4",)),)
    assert block.failures == (Bullet("naive datetime -> local tz -> pass tz=UTC", ("t4",)),)


def test_parse_derives_unique_ids_and_drops_blocks_without_citations() -> None:
    text = (
        "# Task Group: Same Title\nscope: a\napplies_to: cwd=/a; reuse_rule=r\n\n"
        "## Task 1: x\n### rollout_summary_files\n"
        "- f.md (cwd=/a, rollout_path=/p, updated_at=t, thread_id=x1)\n"
        "## Task 1: duplicate number\n### rollout_summary_files\n"
        "- f.md (cwd=/a, rollout_path=/p, updated_at=t, thread_id=x2)\n\n"
        "# Task Group: Same Title\nscope: b\n\n## Task 1: y\n### rollout_summary_files\n"
        "- f.md (cwd=/a, rollout_path=/p, updated_at=t, thread_id=x3)\n\n"
        "# Task Group: no evidence\n## Task 1: z\n### rollout_summary_files\n- not a citation\n"
    )
    memory = parse_memory_md(text)
    assert [b.block_id for b in memory.blocks] == ["same-title", "same-title-2"]
    assert [t.task_id for t in memory.blocks[0].tasks] == ["t1", "t1-2"]
    assert memory.blocks[1].applies_to_cwd is None


def test_block_index_lists_ids() -> None:
    assert render_block_index([BILLING]) == (
        "- `billing-api`: billing-api repository (/src/billing) | building and testing the"
        " billing service; not its deployment"
    )
    assert render_block_index([]) == "(none)"


def test_dict_round_trip_is_stable_json() -> None:
    memory = Memory((BILLING, GLOBAL))
    data = memory.to_dict()
    assert list(data) == ["format", "blocks"]
    assert list(data["blocks"][0]) == [
        "block_id",
        "title",
        "scope",
        "applies_to_cwd",
        "reuse_rule",
        "tasks",
        "preferences",
        "knowledge",
        "failures",
    ]
    assert Memory.from_dict(json.loads(json.dumps(data))) == memory


def test_from_dict_names_the_bad_field() -> None:
    data = Memory((BILLING,)).to_dict()
    data["blocks"][0]["tasks"][1]["citations"][0]["updated_at"] = 5
    try:
        Memory.from_dict(data)
    except ValueError as error:
        assert str(error) == "memory.blocks[0].tasks[1].citations[0].updated_at: expected a string"
    else:
        raise AssertionError("a malformed document was accepted")


def test_helpers_count_and_diff() -> None:
    old = Memory((BILLING,))
    new = Memory((GLOBAL,))
    assert cited_thread_ids(old) == {"a1", "b2", "c3"}
    assert bullet_count(old) == 3
    assert diff_summary(old, old) == "no changes"
    assert diff_summary(old, new) == (
        "+1 block, -1 block, +1 task, -2 tasks, +1 citation, -3 citations, +1 bullet, -3 bullets"
    )


# Text the renderer keeps as is: already on one line, no brackets (which would read as
# citation markers at the end of a bullet) and no commas in keywords (the separator).
_WORDS = st.text(alphabet=string.ascii_letters + string.digits + " .;:=()'\"/->_", max_size=30)


def _one_line(text: str) -> str:
    return " ".join(text.split())


_TEXT = _WORDS.map(_one_line)
_NONEMPTY = _TEXT.filter(bool)
_IDS = st.builds(
    "{}{}".format,
    st.sampled_from("abt019"),
    st.text(alphabet="abt019._:-", max_size=6),
)
_PATHS = st.lists(st.text(alphabet="abc_.-19", min_size=1, max_size=6), min_size=1, max_size=4).map(
    lambda parts: "/" + "/".join(parts)
)


@st.composite
def _citations(draw: st.DrawFn) -> ThreadCitation:
    return ThreadCitation(
        thread_id=draw(_IDS),
        rollout_summary_file=f"rollout_summaries/{draw(_IDS)}.md",
        cwd=draw(st.none() | _PATHS),
        rollout_path=draw(_PATHS),
        updated_at=draw(st.sampled_from(["2025-01-01T00:00:00Z", "2024-12-31T23:59:59+00:00"])),
    )


@st.composite
def _blocks(draw: st.DrawFn, block_id: str) -> Block:
    task_ids = draw(st.lists(_IDS, min_size=1, max_size=4, unique=True))
    tasks = tuple(
        Task(
            task_id=task_id,
            title=draw(_TEXT),
            citations=tuple(draw(st.lists(_citations(), min_size=1, max_size=3))),
            keywords=tuple(draw(st.lists(_NONEMPTY, max_size=3))),
        )
        for task_id in task_ids
    )
    bullets = st.builds(
        Bullet,
        _NONEMPTY,
        st.lists(st.sampled_from(task_ids), min_size=1, max_size=3, unique=True).map(tuple),
    )
    return Block(
        block_id=block_id,
        title=draw(_TEXT),
        scope=draw(_TEXT),
        applies_to_cwd=draw(st.none() | _PATHS),
        reuse_rule=draw(_TEXT),
        tasks=tasks,
        preferences=tuple(draw(st.lists(bullets, max_size=3))),
        knowledge=tuple(draw(st.lists(bullets, max_size=3))),
        failures=tuple(draw(st.lists(bullets, max_size=3))),
    )


@st.composite
def memories(draw: st.DrawFn) -> Memory:
    block_ids = draw(st.lists(_IDS, max_size=4, unique=True))
    return Memory(tuple(draw(_blocks(block_id)) for block_id in block_ids))


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(memories())
def test_render_parse_round_trip(memory: Memory) -> None:
    text = render_memory_md(memory)
    parsed = parse_memory_md(text)
    assert render_memory_md(parsed) == text
    assert parsed == memory
    assert Memory.from_dict(json.loads(json.dumps(memory.to_dict()))) == memory


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=400))
def test_parse_never_fails_and_always_keeps_the_invariants(text: str) -> None:
    memory = parse_memory_md(text)
    assert invariant_violations(memory) == []
    assert render_memory_md(parse_memory_md(render_memory_md(memory))) == render_memory_md(memory)
