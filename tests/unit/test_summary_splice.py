"""A revision of `memory_summary.md`: the lines about a change are split from the rest, and
the model's lines are put back under their headings without losing a line it was not asked
to revise."""

from __future__ import annotations

import pytest

from consolidator.memory.summary_splice import splice_summary, split_summary

CURRENT = """v1

## User Profile

- Works in /a: 3 tasks [task a/t1]
- Works in /b: 2 tasks [task b/t1]

## User preferences

- None recorded yet.

## General Tips

- make test runs the suite in /b [task b/t2]

## What's in Memory

### /b

#### 2026-11-02

- fixed b (rollout_summaries/2026-11-02-b.md, thread_id=tb1)

### /a

#### 2026-11-01

- fixed a (rollout_summaries/2026-11-01-a.md, thread_id=ta1)

#### 2026-10-20

- set up a (rollout_summaries/2026-10-20-a.md, thread_id=ta0)

### Older Memory Topics

#### /a

- a: build, deploy [task a/t1]
"""
KEPT_LINES = [
    "- Works in /a: 3 tasks [task a/t1]",
    "- fixed a (rollout_summaries/2026-11-01-a.md, thread_id=ta1)",
    "- set up a (rollout_summaries/2026-10-20-a.md, thread_id=ta0)",
    "- a: build, deploy [task a/t1]",
]


def about_b(line: str) -> bool:
    return "b/" in line or "tb1" in line


def test_the_split_keeps_the_headings_of_each_part() -> None:
    kept, revise = split_summary(CURRENT, about_b)

    assert all(line in kept.splitlines() for line in KEPT_LINES)
    assert not any(about_b(line) for line in kept.splitlines())
    assert kept.startswith("v1\n") and "## General Tips\n\n- None recorded yet." in kept
    assert revise.splitlines()[:3] == ["## User Profile", "", "- Works in /b: 2 tasks [task b/t1]"]
    assert "### /b\n\n#### 2026-11-02\n\n- fixed b" in revise and "/a" not in revise


def test_lines_the_answer_leaves_out_stay_and_lines_it_repeats_are_not_doubled() -> None:
    kept, _ = split_summary(CURRENT, about_b)
    # A model that answers a whole file of its own: it drops most lines it was not asked to
    # revise and repeats one of them.
    answer = """v1

## User Profile

- Works in /b: 3 tasks [task b/t1]
- Works in /a: 3 tasks [task a/t1]

## What's in Memory

### /b

#### 2026-11-03

- fixed b again (rollout_summaries/2026-11-03-b.md, thread_id=tb2)

#### 2026-11-02

- fixed b (rollout_summaries/2026-11-02-b.md, thread_id=tb1)
"""
    text = splice_summary(kept, answer)

    lines = text.splitlines()
    assert all(lines.count(line) == 1 for line in KEPT_LINES)
    assert "- make test runs the suite in /b [task b/t2]" not in lines
    assert lines.index("#### 2026-11-03") < lines.index("#### 2026-11-02") < lines.index("### /a")
    assert lines.index("- Works in /b: 3 tasks [task b/t1]") < lines.index("## User preferences")
    assert "- None recorded yet." in lines and lines[0] == "v1"


def test_a_new_project_goes_first_and_an_empty_section_keeps_its_placeholder() -> None:
    kept, _ = split_summary(CURRENT, about_b)
    answer = "## What's in Memory\n\n### /c\n\n#### 2026-11-04\n\n- c (thread_id=tc1)\n"

    lines = splice_summary(kept, answer).splitlines()

    assert lines.index("### /c") < lines.index("### /a") < lines.index("### Older Memory Topics")
    tips = lines.index("## General Tips")
    assert lines[tips + 2] == "- None recorded yet."


def test_when_space_is_short_the_oldest_kept_dated_lines_go_first() -> None:
    kept, _ = split_summary(CURRENT, about_b)
    answer = "## What's in Memory\n\n### /b\n\n#### 2026-11-03\n\n- b (thread_id=tb2)\n"
    whole = splice_summary(kept, answer)
    budget = len(whole.encode()) - 10

    text = splice_summary(kept, answer, budget)

    assert len(text.encode()) <= budget
    assert "thread_id=ta0" not in text and "thread_id=ta1" in text and "thread_id=tb2" in text
    assert "#### 2026-10-20" not in text
    # The model's own lines never make room: an answer too long stays too long (and is refused).
    long = "## General Tips\n\n" + "".join(f"- tip {n} [task a/t1]\n" for n in range(50))
    assert len(splice_summary(kept, long, budget).encode()) > budget


def test_a_line_under_no_section_is_refused() -> None:
    kept, _ = split_summary(CURRENT, about_b)

    with pytest.raises(ValueError, match="line 1 is under no section"):
        splice_summary(kept, "- floating [task a/t1]\n")
