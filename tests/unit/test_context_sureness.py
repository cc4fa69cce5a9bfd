"""What `context` injects is what is sure: each entry shown names its evidence, the rest is
stored and searchable, and a model's entries keep its judgment but not a pasted shape. The
false entries below are in the words they were found in on real sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from consolidator.backends.extractive.statements import user_statements
from consolidator.face.context import AgentContext, build_context, render_for
from consolidator.memory.blocks import Block, Bullet, Memory, Origin, Section, Task, ThreadCitation
from consolidator.memory.sureness import Entry, judge

PROJECT = "/work/shop"


def _task(thread: str) -> Task:
    citation = ThreadCitation(
        thread, f"rollout_summaries/{thread}.md", PROJECT, "/s.jsonl", "2026-11-01T10:00:00Z"
    )
    return Task(f"t-{thread}", f"work in {thread}", (citation,))


def _said(
    text: str, origin: Origin = "user", threads: tuple[str, ...] = ("a",), rule: str = ""
) -> Bullet:
    """A bullet as the offline reader stores it: its wording traced to the sessions, and
    the rule that read it when one is named."""
    return Bullet(
        text,
        tuple(f"t-{t}" for t in threads),
        tuple((t, text) for t in threads),
        tuple((t, origin) for t in threads),
        tuple((t, rule) for t in threads if rule),
    )


def _block(
    cwd: str | None = PROJECT, threads: tuple[str, ...] = ("a",), **sections: tuple[Bullet, ...]
) -> Block:
    return Block(
        block_id="general" if cwd is None else "shop",
        title="shop",
        scope="",
        applies_to_cwd=cwd,
        reuse_rule="",
        tasks=tuple(_task(t) for t in threads),
        **sections,
    )


def _context(*blocks: Block) -> AgentContext:
    return build_context(
        Memory(blocks),
        cwd=PROJECT,
        memory_dir=Path("/m"),
        max_bytes=20_000,
        version=1,
        source="database",
    )


def _pref(quote: str, where: str = "working in shop") -> str:
    return f'when {where}, the user asked: "{quote}"'


def test_the_false_entries_found_on_real_sessions_are_not_injected() -> None:
    asked = ("a", "b", "c", "d", "e", "f", "g")
    everywhere = _block(
        None,
        threads=asked,
        preferences=(
            _said(_pref("What should I", "in every project"), threads=asked),
            _said(
                _pref("no hurry on this one, just want it before friday.", "in every project"),
                threads=("a", "b"),
            ),
        ),
    )
    project = _block(
        preferences=(
            _said(
                _pref(
                    "Don't stop until all functions are ported, tests pass, and you have"
                    " 100% coverage"
                )
            ),
            _said(_pref("It's bad idea, since entire converation will be proceed every time.")),
        ),
        knowledge=(
            _said("You have 100% coverage."),
            _said("Const currentMessage = messages[currentIndex]"),
            _said("We offer a 14-day free trial"),
        ),
        failures=(
            _said(
                "`rm -rf dist` failed (The user doesn't want to proceed with this tool use.)"
                " -> passed when run again",
                "tool",
            ),
        ),
    )
    context = _context(everywhere, project)
    entries = [
        line
        for line in context.markdown.splitlines()
        if line.startswith("- ") and "rollout_summaries/" not in line
    ]
    assert entries == []
    assert context.searchable == 8
    assert context.markdown.rstrip().endswith("`consolidator search`.")


def test_a_fix_that_uses_a_value_taken_back_is_not_injected() -> None:
    block = _block(
        threads=("a", "b"),
        knowledge=(
            _said("[superseded 2026-11-02] The staging db listens on port 6543."),
            _said("The staging db listens on port 6544 now.", threads=("b",)),
        ),
        failures=(
            _said("`psql -p 5432` failed (connection refused) -> fixed by `psql -p 6543`", "tool"),
            _said(
                "`psql -h db -p 5432` failed (connection refused) -> fixed by `psql -h db -p 6544`",
                "tool",
                ("b",),
            ),
        ),
    )
    shown = _context(block).markdown
    assert "psql -h db -p 6544" in shown and "port 6544 now" in shown
    assert "psql -p 6543" not in shown and "port 6543" not in shown


def test_a_test_run_fixed_by_the_last_command_before_it_passed_is_not_sure() -> None:
    tally = (
        "`mix test 2>&1` failed (14 doctests, 127 tests, 12 failures)"
        " -> fixed by `mix deps.get 2>&1`"
    )
    build = (
        "`node assets/build.js` failed (Error: Build failed with 1 error:)"
        " -> fixed by `cd assets && node build.js`"
    )
    shown = _context(_block(failures=(_said(tally, "tool"), _said(build, "tool")))).markdown
    assert "mix deps.get" not in shown
    assert "cd assets && node build.js" in shown


@pytest.mark.parametrize(
    "quote",
    [
        "Always run migrations after pulling.",
        "Don't forget to run migrations after pulling.",
        "Never forget to tag the release",
        "always use uv, never pip",
        "pls pnpm, not npm, for the install",
        "Run the tests with `make check`, not pytest direct",
        "I prefer small commits over big ones",
        "from now on run `make lint` before you say you're done",
        "no force pushes to main please",
        "keep PRs small, one concern each",
        "star imports are a no-go in this codebase",
        "commit messages should be in the imperative mood",
        "If you need to know whether a variable is set, use `grep -c '^AWS_' .env` or similar,"
        " never print the values.",
    ],
)
def test_a_standing_instruction_is_sure(quote: str) -> None:
    spoken = user_statements(["can you have a look at this", quote])
    [said] = spoken.instructions
    bullet = _said(_pref(said), rule=spoken.rules[said])
    judgment = judge(Entry(_block(), "preferences", bullet))
    assert judgment.sure
    assert [e.kind for e in judgment.evidence] == ["standing_instruction"]
    assert "in /work/shop" in judgment.evidence[0].detail


@pytest.mark.parametrize(
    "quote",
    [
        "Finish up the users work by rigging up the chatbot-ui to use lmstudio instead of their"
        " initial implementatiion of ollama.",
        "Vite is on 5173 as always.",
        "Don't stop until all functions are ported",
        "no hurry on this one, just want it before friday.",
        "use the new endpoint for now",
    ],
)
def test_a_request_of_the_moment_is_not_a_standing_instruction(quote: str) -> None:
    assert user_statements(["can you have a look at this", quote]).instructions == []
    for rule in ("", "fact.resource", "evidence.note"):
        bullet = _said(_pref(quote), rule=rule)
        assert "standing_instruction" not in _evidence("preferences", bullet)


def _evidence(section: Section, bullet: Bullet, block: Block | None = None) -> list[str]:
    return [e.kind for e in judge(Entry(block or _block(), section, bullet)).evidence]


def test_each_kind_of_evidence_is_named() -> None:
    assert _evidence("knowledge", _said("The staging db listens on port 6544.")) == [
        "current_value"
    ]
    assert _evidence("knowledge", _said("For the shader part ask @maaike")) == ["current_value"]
    assert _evidence("knowledge", _said("The staging bucket is acme_assets.", "note")) == [
        "note",
        "current_value",
    ]
    two = _block(threads=("a", "b"))
    concluded = _said("ROUND_HALF_EVEN moves two totals by a cent.", "agent", ("a", "b"))
    assert _evidence("knowledge", concluded, two) == ["several_sessions"]
    assert _evidence("knowledge", _said("ROUND_HALF_EVEN moves two totals.", "agent")) == []
    would = "A test that sums the sample invoice's lines and expects 118.35 would pin it."
    assert _evidence("knowledge", _said(would, "agent", ("a", "b")), two) == []
    assert _evidence("knowledge", _said("It might be on port 6544.")) == []
    assert _evidence("knowledge", _said("Tomorrow i will move redis to 6390")) == []
    assert _evidence("knowledge", _said("For this task you need to check the logs")) == []
    assert _evidence("knowledge", _said("The api is going to listen on 8443.")) == []
    billed = "Customer 4471 was billed 100.01 on invoice INV-2026-0912."
    assert _evidence("knowledge", _said(billed)) == []
    assert _evidence("knowledge", _said("The deploy script is different now")) == []
    assert _evidence("knowledge", _said("We're on the new version now")) == []
    assert _evidence("knowledge", _said("We moved the python version")) == []
    assert _evidence("knowledge", _said("We switched to mkdocs")) == ["current_value"]
    assert _evidence("knowledge", _said("The job queue is sqs now")) == ["current_value"]
    moved = _said("The staging db was moved to port 6544.")
    assert _evidence("knowledge", moved) == ["current_value"]
    held = judge(
        Entry(_block(), "knowledge", _said("scripts/sync.sh runs the upload.", "agent"), True)
    )
    assert [e.kind for e in held.evidence] == ["repository_check"]


def test_a_remark_only_guessed_to_state_a_value_is_stored_but_never_sure() -> None:
    said = user_statements(["pls fix the upload", "max upload size 25mb (nginx)"])
    [(text, rule)] = said.rules.items()
    assert (text, rule) == ("Max upload size 25mb (nginx)", "kept.value")
    two = _block(threads=("a", "b"))
    assert _evidence("knowledge", _said(text, threads=("a", "b"), rule=rule), two) == []
    read = _said(text, threads=("a", "b"), rule="statement.start")
    assert _evidence("knowledge", read, two) == ["current_value", "several_sessions"]
    mixed = Bullet(
        text,
        ("t-a", "t-b"),
        (("a", text), ("b", text)),
        (("a", "user"), ("b", "user")),
        (("a", rule), ("b", "statement.start")),
    )
    assert _evidence("knowledge", mixed, two) == ["current_value", "several_sessions"]


def test_a_value_by_itself_is_stored_but_never_sure() -> None:
    said = user_statements(
        ["not make build-billing but tools/build_billing.sh, sorry, I mixed them up."]
    )
    assert said.facts == ["tools/build_billing.sh"]
    two = _block(threads=("a", "b"))
    assert _evidence("knowledge", _said(said.facts[0], threads=("a", "b")), two) == []
    stated = _said("tools/build_billing.sh is how we build.", threads=("a", "b"))
    assert _evidence("knowledge", stated, two) == ["current_value", "several_sessions"]


def test_knowledge_said_again_in_other_words_is_shown_once() -> None:
    block = _block(
        threads=("a", "b"),
        knowledge=(
            _said("Dev postgres listens on localhost:5454, not the usual one.", threads=("a", "b")),
            _said("psql -h localhost -p 5454 gets you the dev db."),
            _said("Connect to the dev database on port 5454"),
            _said("The staging host is stage2.platform.internal."),
            _said("stage2.platform.internal needs the VPN."),
            _said("[possible conflict 2026-11-01] The dev database is on port 5454."),
        ),
    )
    context = _context(block)
    shown = [entry.text for entry in context.entries]
    assert shown == [
        "Dev postgres listens on localhost:5454, not the usual one.",
        "The staging host is stage2.platform.internal.",
        "stage2.platform.internal needs the VPN.",
        "[possible conflict 2026-11-01] The dev database is on port 5454.",
    ]
    assert context.searchable == 2


def test_a_model_s_entries_keep_its_judgment_but_not_a_pasted_shape() -> None:
    curated = Bullet("Billing exports run nightly from the worker.", ("t-a",))
    pasted = Bullet("const total = lines.reduce(sum, 0);", ("t-a",))
    context = _context(_block(knowledge=(curated, pasted)))
    assert "Billing exports run nightly" in context.markdown
    assert "lines.reduce" not in context.markdown
    (entry,) = json.loads(render_for(context, "json"))["entries"]
    assert entry["evidence"] == [
        {"kind": "model_judgment", "detail": "curated by the consolidation model"}
    ]
    assert json.loads(render_for(context, "json"))["searchable"] == 1


@pytest.mark.parametrize("output", ["markdown", "claude-hook", "codex-hook"])
def test_every_format_ends_with_how_to_search_the_rest(output: str) -> None:
    context = _context(_block(knowledge=(_said("The api listens on 8080."),)))
    printed = render_for(context, output)
    assert "search_memory" in printed and "search_sessions" in printed
    assert "consolidator search" in printed


def test_an_older_value_in_possible_conflict_is_left_to_search_a_same_day_dispute_is_shown() -> (
    None
):
    older = '[possible conflict 2026-10-02 with "Staging db moved, its 6544 now." of 2026-10-11] '
    block = _block(
        knowledge=(
            _said(older + "Staging db is on port 6543."),
            _said("Staging db moved, its 6544 now."),
            _said("[conflicting 2026-03-02] The worker pool size is 8"),
            _said("[conflicting 2026-03-02] Worker pool size is 16"),
        )
    )
    shown = _context(block).markdown
    assert "port 6543" not in shown and "its 6544 now" in shown
    assert "pool size is 8" in shown and "pool size is 16" in shown


@pytest.mark.parametrize(
    "quote",
    [
        "Don't create separate documents.",
        "Don't produce code, design solution first",
        "There is a need to implement metrics plugin for codex similar to how claude and gemini"
        " is implemented",
        "The issue must be address, option 1 is not accepable.",
        "Before providing proposal for phase 4.1 check existing implementation for metrics.",
        "there is a need to prepare focused max 8 min demo scenario showcasing platform and"
        " capabilities",
    ],
)
def test_a_request_about_the_work_at_hand_said_as_a_rule_is_stored_not_shown(quote: str) -> None:
    spoken = user_statements(["can you have a look at this", quote])
    [said] = spoken.instructions
    once = _said(_pref(said), rule=spoken.rules[said])
    assert not judge(Entry(_block(), "preferences", once)).sure
    twice = _said(_pref(said), threads=("a", "b"), rule=spoken.rules[said])
    judgment = judge(Entry(_block(threads=("a", "b")), "preferences", twice))
    assert [e.kind for e in judgment.evidence] == ["standing_instruction"]


@pytest.mark.parametrize(
    "quote",
    [
        "don't touch the generated files in gen/",
        "Put [billing-layout] at the front of the commit subject",
        "Make lint has to pass before anything gets pushed",
        "the e2e suite must always run with 4 workers on port 4173",
    ],
)
def test_a_rule_of_that_form_naming_a_value_or_a_routine_of_the_work_is_sure(quote: str) -> None:
    spoken = user_statements(["can you have a look at this", quote])
    said = [*spoken.instructions, *spoken.facts]
    section: Section = "preferences" if spoken.instructions else "knowledge"
    text = _pref(said[0]) if spoken.instructions else said[0]
    assert judge(Entry(_block(), section, _said(text, rule=spoken.rules[said[0]]))).sure


@pytest.mark.parametrize(
    ("said", "rule"),
    [
        ("It's just separate phase1", "statement.start"),
        ("No, it's not phase 1 there bunch of pahses completed", "statement.start"),
        ("In addition - there is timestamp and session id", "statement.start"),
        ("Update phase 4.1 document", "fact.how-to"),
    ],
)
def test_a_reply_about_a_part_of_the_discussion_states_no_value(said: str, rule: str) -> None:
    assert _evidence("knowledge", _said(said, rule=rule)) == []


def test_a_version_beside_a_tool_is_still_a_value() -> None:
    assert _evidence("knowledge", _said("Update python 3.12 in ci", rule="fact.how-to")) == [
        "current_value"
    ]
    assert _evidence("knowledge", _said("The runtime is just python3.12")) == ["current_value"]


@pytest.mark.parametrize(
    "pointing",
    ["This is for BLOG-437", "It runs on 8081", "That's in src/api/", "It's just python3.12"],
)
def test_a_value_said_of_it_or_this_is_stored_but_never_sure(pointing: str) -> None:
    """What "it" or "this" was is in the conversation, not in the entry: shown to a new
    session, the value belongs to whatever the agent takes "it" for."""
    assert user_statements(["fix the checkout", pointing]).facts == [pointing]
    assert _evidence("knowledge", _said(pointing)) == []
    named = pointing.replace("It", "The api", 1).replace("This", "The task", 1)
    assert _evidence("knowledge", _said(named.replace("That's", "The router is", 1))) == [
        "current_value"
    ]


def test_a_failure_known_only_by_its_exit_code_is_stored_not_shown() -> None:
    bare = (
        '`codemie-codex --task "Calculate 5 factorial and explain the calculation step by step"`'
        ' failed (exit code 1) -> fixed by `codemie-codex --profile ollama --task "Calculate 5'
        ' factorial"`'
    )
    named = "`make test` failed (exit code 2: no rule to make target) -> fixed by `make check`"
    assert _evidence("failures", _said(bare, "tool")) == []
    assert _evidence("failures", _said(named, "tool")) == ["confirmed_fix"]


def test_what_a_tool_printed_from_the_user_s_home_is_not_the_project_s_state() -> None:
    home = "trust_level in ~/.codex/config.toml is trusted (printed by `cat ~/.codex/config.toml`)"
    own = "region in deploy/aws.toml is eu-west-1 (printed by `cat deploy/aws.toml`)"
    inside = f"port in {PROJECT}/dev.env is 5454 (printed by `cat {PROJECT}/dev.env`)"
    assert _evidence("knowledge", _said(home, "tool")) == []
    assert _evidence("knowledge", _said(own, "tool")) == ["current_value"]
    assert _evidence("knowledge", _said(inside, "tool")) == ["current_value"]


def test_a_reaction_about_it_with_a_standing_word_is_no_standing_rule() -> None:
    reaction = "It's bad idea, since entire converation will be proceed every time."
    spoken = user_statements(["can you have a look at this", reaction])
    [said] = spoken.instructions
    bullet = _said(_pref(said), rule=spoken.rules[said])
    assert not judge(Entry(_block(), "preferences", bullet)).sure
    said_again = _said(_pref(said), threads=("a", "b"), rule=spoken.rules[said])
    assert judge(Entry(_block(threads=("a", "b")), "preferences", said_again)).sure


@pytest.mark.parametrize(
    "message",
    [
        "search for /clear command in ~/.claude folders - there are plenty of sessions with this"
        " command, analyze file creation date and update date and find closest files with update"
        " date, so that you can figure out when previous session ended",
        "TODO is not acceptable, implementation must be full. comments about performance also"
        " valid, need to look only for current date while performing matching for session.",
    ],
)
def test_an_order_or_a_reply_to_the_agent_is_no_statement_of_the_project(message: str) -> None:
    """Stored as a guess at most (found by search), never read as a statement."""
    spoken = user_statements(["can you have a look at this", message])
    read_as = {spoken.rules[fact] for fact in spoken.facts if "search" in fact.lower()}
    assert read_as <= {"kept.after-order"}
    assert not [fact for fact in spoken.facts if "need to" in fact]


@pytest.mark.parametrize(
    "wished",
    [
        "The Packmind product tour should display the code in @frontend/src/productTour.tsx",
        "The file system matches the last shadow commit, so we should add this session on top",
    ],
)
def test_how_something_ought_to_be_is_not_the_project_s_state(wished: str) -> None:
    """A wish or a plan for the work says the project is not so yet: stored, searchable,
    never shown as how the project is."""
    assert _evidence("knowledge", _said(wished)) == []
    said_as_it_is = wished.replace("should display", "displays").replace("we should add", "we add")
    assert _evidence("knowledge", _said(said_as_it_is)) == ["current_value"]


def test_a_value_beside_a_pronoun_subject_run_on_after_it_is_not_sure() -> None:
    """The pronoun is the subject of the verb even a few words in: what "it" was is in the
    conversation, not in the entry."""
    run_on = "Doublecheck 019b7f04-0b04-7cd3-b739-bfa632f7459e it has great example of tokens"
    assert _evidence("knowledge", _said(run_on)) == []
    named = "Session 019b7f04-0b04-7cd3-b739-bfa632f7459e has great examples of tokens"
    assert _evidence("knowledge", _said(named)) == ["current_value"]


def test_a_sound_before_a_pronoun_subject_or_an_example_cut_from_a_question_is_not_sure() -> None:
    """As an entireio/cli session of tests/fixtures/real said them: a reaction after a sound
    ("arrggghh"), and the example a question gave, split from it."""
    for said in ("Arrggghh that is no good.", "e.g. `entire explain -c 7674489fb0a9`"):
        assert not judge(Entry(_block(), "knowledge", _said(said))).sure, said
    assert judge(Entry(_block(), "knowledge", _said("Sooo the api port is 7070"))).sure


def test_a_message_sent_cut_off_mid_sentence_is_no_standing_rule() -> None:
    # As an entireio/cli session of tests/fixtures/real ended a message.
    spoken = user_statements(
        [
            "look at this",
            "I'm quite sure this happened, branches got deleted, if not I'll retry this now and"
            " make sure it's ",
        ]
    )
    [said] = spoken.instructions
    entry = Entry(_block(), "preferences", _said(_pref(said), rule=spoken.rules[said]))
    assert not judge(entry).sure


def test_trouble_said_after_the_opening_states_nothing_of_the_project() -> None:
    spoken = user_statements(
        ["let's make some more changes to explain", "hmm, the amend has broken our checkpoints"]
    )
    assert spoken.facts == []
    kept = user_statements(["check the deploy", "ping Priya if the deploy fails"])
    assert kept.facts == ["Ping Priya if the deploy fails"]


def test_a_test_run_s_bare_fail_fixed_by_an_edit_is_not_a_confirmed_fix() -> None:
    """Go's FAIL is a test run's verdict like a tally: the edit that made the run pass is the
    ordinary loop of edit and run again, and the agent's account of it may be wrong."""
    verdict = (
        "`mise run test -- ./redact/...` failed (FAIL) -> the agent said: The test expectation"
        " is wrong. -> fixed in `redact/redact_test.go`"
    )
    sandbox = (
        "`pnpm test --filter web -- --run` failed (failed in sandbox: MISSING DEPENDENCY Cannot"
        " find dependency 'jsdom') -> fixed by `pnpm add -D jsdom --filter web`"
    )
    assert _evidence("failures", _said(verdict, "tool")) == []
    assert _evidence("failures", _said(sandbox, "tool")) == ["confirmed_fix"]


@pytest.mark.parametrize(
    "message",
    [
        "Still reads for the quick reader as if we start a new branch always",
        'Mention also that that for AGENTS.md target, the skills should be in ".agent/skills"'
        " directory",
    ],
)
def test_a_seeming_or_an_order_to_write_something_is_no_standing_rule_nor_a_fact(
    message: str,
) -> None:
    """A standing word inside a comparison says how a text reads; an order to mention
    something names the text to write. Both are kept for search at most."""
    spoken = user_statements(["can you have a look at this", message])
    assert spoken.instructions == []
    assert {spoken.rules[fact].split(".")[0] for fact in spoken.facts} <= {"kept"}


def test_a_terse_correction_naming_the_value_it_replaces_states_the_value_now() -> None:
    """ "redis at 6380 not 6379" has no verb, but the value it replaces says it is how things
    are now: read as a statement, shown, and the old value taken back."""
    spoken = user_statements(["fix the queue", "redis at 6380 not 6379"])
    assert spoken.facts == ["Redis at 6380"]
    assert spoken.revoked == ["at 6379"]
    [fact] = spoken.facts
    assert _evidence("knowledge", _said(fact, rule=spoken.rules[fact])) == ["current_value"]


@pytest.mark.parametrize("reply", ["its 6544 now", "6544 now", "6544*"])
def test_a_value_given_again_with_now_or_a_trailing_star_corrects_the_last(reply: str) -> None:
    """No word of correcting, but the value and "now" (or the star a typo's fix is written
    with) say only that it replaces the value read last: the new one stands, the old is
    taken back."""
    spoken = user_statements(["fix staging", "the staging port is 6543", reply])
    assert spoken.facts == ["The staging port is 6544"]
    assert spoken.revoked == ["6543"]
