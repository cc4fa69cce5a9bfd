"""How people talk to coding agents, as the memory-quality corpus writes it.

Written from the published sessions in `tests/fixtures/real` (their SOURCES.md names each
one): requests there are short, lower-case, run on, carry their reason after a comma and often
end in a question ("scrolling back in xterm.js still does not work (maybe because outer web
catches it)?", "finish up the users work by rigging up the chatbot-ui to use lmstudio instead
of ..."); agents conclude in plain statements with a file and line ("The build script expects
to be run from within the `assets/` directory since the entry point is `js/app.js`",
"`list_panes/0` will NOT crash. It returns `{:error, reason}` safely"). Every kind of fact
below has at least five phrasings, most of them with no lead-in word at all; the few that open
with one (`CUE_OPENERS`) are there because people do write them too.

Nothing here comes from the extractor: the benchmark measures it, so it must not share its
vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Voice = Literal["user", "agent"]

# Lead-in words that announce "remember this". A phrasing that opens with one is marked `cue`.
CUE_OPENERS = (
    "fyi",
    "note that",
    "note:",
    "btw",
    "by the way",
    "remember",
    "keep in mind",
    "correction:",
    "heads up",
    "reminder",
    "important:",
    "root cause:",
    "for the record",
)


@dataclass(frozen=True)
class Phrasing:
    """One way of saying a kind of fact: `text` is a format string over the fact's fields."""

    phrasing_id: str
    text: str
    voice: Voice = "user"

    @property
    def cue(self) -> bool:
        return opens_with_cue(self.text)


def opens_with_cue(text: str) -> bool:
    lowered = text.lower().lstrip()
    return any(lowered.startswith(opener) for opener in CUE_OPENERS)


def fill(frame: str, **parts: str) -> str:
    """`frame` with its parts, each part's closing full stop left to the frame."""
    return frame.format(**{name: part.rstrip(".") for name, part in parts.items()})


def _pool(kind: str, *texts: str | tuple[str, Voice]) -> tuple[Phrasing, ...]:
    phrasings = []
    for number, entry in enumerate(texts, 1):
        if isinstance(entry, str):
            phrasings.append(Phrasing(f"{kind}/{number}", entry))
        else:
            phrasings.append(Phrasing(f"{kind}/{number}", *entry))
    return tuple(phrasings)


# Facts about a project. Fields: {cmd} {port} {path} {host} {tool} {version} {handle} {ticket}
# {tag} {setting} {topic} (a word naming what the fact is about), {file} and {line} (where in
# the code an agent saw it).
FACT_PHRASINGS: dict[str, tuple[Phrasing, ...]] = {
    "gate": _pool(
        "gate",
        "run {cmd} before you push, CI goes red otherwise",
        "{cmd} has to pass before anything gets pushed",
        "before pushing make sure {cmd} is clean",
        "you need `{cmd}` locally too, the pre-push hook doesn't run it",
        "we gate merges on {cmd} so run that first",
        "btw we gate pushes on `{cmd}`",
        "Remember to run `{cmd}` before pushing.",
        ("The lint step of this repository is `{cmd}` (see .github/workflows/ci.yml:23).", "agent"),
    ),
    "command": _pool(
        "command",
        "regenerate the {topic} stubs with {cmd}",
        "`{cmd}` rebuilds the {topic} client",
        "if the {topic} types are stale, {cmd} fixes it",
        "you have to run {cmd} after touching the {topic} schema",
        "Remember: {cmd} regenerates the {topic} client.",
        ("The {topic} client is generated: `{cmd}` writes it ({file}:{line} says so).", "agent"),
    ),
    "port": _pool(
        "port",
        "the {topic} db is on {port}",
        "{topic} postgres listens on localhost:{port}, not the usual one",
        "connect to the {topic} database on port {port}",
        "psql -h localhost -p {port} gets you the {topic} db",
        "FYI the {topic} database listens on port {port}.",
        (
            "The {topic} database is the one on port {port} ({file}:{line} maps it).",
            "agent",
        ),
    ),
    "path": _pool(
        "path",
        "the {topic} fixtures are under {path}/",
        "put new {topic} fixtures in {path}/, that's where the tests look",
        "the {topic} tests read their cases from {path}/",
        "there's a folder of {topic} fixtures at {path}/ you can reuse",
        "Note that the {topic} fixtures live in {path}/.",
        ("The {topic} tests load their cases from `{path}/` ({file}:{line}).", "agent"),
    ),
    "host": _pool(
        "host",
        "the staging {topic} box is {host}",
        "staging {topic} runs on {host}, ssh in as deploy",
        "you can reach the {topic} service at {host}",
        "point it at {host} for the {topic} stuff",
        "btw the {topic} host is {host}",
        ("The {topic} client talks to `{host}` ({file}:{line} builds the URL).", "agent"),
    ),
    "version": _pool(
        "version",
        "we're pinned to {tool} {version}, don't bump it",
        "{tool} has to be {version}, newer ones break the build",
        "this only works with {tool} {version}",
        "CI uses {tool} {version} so match that locally",
        "Note that we use {tool} {version} here.",
        ("The build expects {tool} {version}: {file}:{line} pins it.", "agent"),
    ),
    "person": _pool(
        "person",
        "check with {handle} before touching the {topic} cron",
        "ask {handle} about anything {topic}, they wrote it",
        "{handle} owns the {topic} pipeline, loop them in on changes",
        "if the {topic} job breaks again ping {handle} on slack",
        "Remember {handle} has to sign off on {topic} changes.",
    ),
    "ticket": _pool(
        "ticket",
        "this is for {ticket}, link it in the PR",
        "the flaky {topic} test is tracked in {ticket}",
        "{ticket} has the background on why {topic} works like this",
        "we're doing the {topic} part under {ticket}",
        "FYI the {topic} bug is {ticket}.",
    ),
    "convention": _pool(
        "convention",
        "commit messages here start with [{tag}]",
        "we prefix commits with [{tag}] in this repo",
        "put [{tag}] at the front of the commit subject, the changelog script greps for it",
        "the release notes tool only picks up commits tagged [{tag}]",
        "Note that every commit subject starts with [{tag}].",
    ),
    "knowledge": _pool(
        "knowledge",
        ("The timeout comes from `{setting}`, not the environment: {file}:41 reads it.", "agent"),
        ("Found it. The client takes its timeout from {setting} ({file}:41).", "agent"),
        ("So the client never looks at the environment; it reads {setting} at {file}:41.", "agent"),
        ("`{setting}` is what sets the client timeout, read once at import ({file}:41).", "agent"),
        ("Root cause: the client reads its timeout from {setting}, not the environment.", "agent"),
    ),
}

# Defaults: a standing instruction. Fields: {verb} {tool} {other} ("use", "pnpm", "npm").
DEFAULT_PHRASINGS = _pool(
    "default",
    "always {verb} {tool}, never {other}",
    "{verb} {tool} instead of {other} please",
    "please don't {verb} {other}, {tool} only",
    "I prefer {tool} over {other}",
    "from now on {tool}, not {other}",
    "Remember: {verb} {tool}, never {other}.",
)
# A rule about a tool, stated before it is dropped. Field: {tool}.
RULE_PHRASINGS = _pool(
    "rule",
    "always run {tool} before committing",
    "{tool} has to be clean before you commit",
    "format everything you touch with {tool}",
    "run {tool} on the files you changed, CI checks it",
    "Remember to run {tool} before committing.",
)
# The home folder's own fact. Field: {path}.
HOME_PHRASINGS = _pool(
    "home-path",
    "my dotfiles are in {path}",
    "the dotfiles repo is {path}, stow links it",
    "edit the copy in {path}, not the symlink",
    "{path} has all my dotfiles",
    "FYI my dotfiles live in {path}.",
)
# A script named in words. Fields: {what} ("deploy", "build") and {old}, the script.
SCRIPT_PHRASINGS = _pool(
    "script",
    "{what} with {old}",
    "{old} does the {what}",
    "to {what} just run {old}",
    "the {what} script is {old}, it needs the VPN",
    "btw {old} is how we {what}",
)
# Said so that it clearly holds for every project.
GENERAL_FRAMES = (
    "{say}, in every repo",
    "for all my projects: {say}",
    "{say}. that goes for everything I work on",
    "in general {say}",
)
# Tied to one project's broken environment: must stay in that project.
LOCAL_PHRASINGS = _pool(
    "local-rule",
    "in this repo run pytest with {tool}, the CI image's postgres is broken",
    "here you have to pass {tool} to the tests, the database on this box can't migrate",
    "always add {tool} when you run the tests in this repo, our runner is broken",
)

# Corrections that revoke an earlier statement and give the new value.
# Fields: {subject} {old} {new}.
CORRECTION_PHRASINGS = _pool(
    "correction",
    "forget what I said about the {subject}, that's wrong: it's {new}",
    "that's wrong, the {subject} is {new} now, forget {old}",
    "not {old} but {new}, sorry, I mixed them up",
    "we no longer use {old}, the {subject} is {new}",
    "we're on {new} now, {old} is gone",
    "scratch that, {old} was the old {subject}. it's {new}",
    "Correction: the {subject} is {new}, not {old}.",
)
# Corrections that drop a rule with no new value. Fields: {tool}.
DROP_PHRASINGS = _pool(
    "drop",
    "forget what I said about {tool}, we dropped it",
    "we dropped {tool}",
    "{tool} is no longer used here, ignore that rule",
    "don't bother with {tool} anymore, we took it out",
    "stop running {tool}, it's gone from the toolchain",
)

# A value that changed later, said in words. Fields: {subject} {new}.
CHANGE_PHRASINGS = _pool(
    "change",
    "the {subject} is {new} now",
    "we moved the {subject} to {new} last week",
    "{new} is the new {subject}",
    "switched the {subject} over to {new}, use that",
    "heads up, the {subject} changed to {new}",
)
# A change said without its value: the value is only in the file edit next to it.
CHANGE_BY_EDIT_PHRASINGS = _pool(
    "change-by-edit",
    "we're on the new version now, bump it in the config",
    "we moved the {subject}, fix the config to match",
    "update the {subject} in the config, it changed",
    "the {subject} is different now, change the file",
    "new {subject} as of today, please update it",
)

# Questions: never a fact or a preference, however much they sound like a rule. Field: {topic}.
QUESTIONS = _pool(
    "question",
    "why does //svc/{topic} rebuild every time?",
    "is the {topic} test always this slow?",
    "should we always run the {topic} migrations first?",
    "do we ever use the {topic} flag?",
    "how come the {topic} build never hits the cache?",
    "what's the {topic} endpoint for again?",
)
# Acknowledgements and nudges: nothing to remember.
ACKNOWLEDGEMENTS = (
    "keep going",
    "ok",
    "great, thanks. commit it",
    "lgtm, ship it",
    "perfect, thanks!",
    "yes do it",
    "sounds good, go ahead",
    "nice, that works",
    "Thanks! Please update the README for current changes",
)
NOTHING_OPENINGS = (
    "say hi",
    "Hello",
    "what time is it in Tokyo?",
    "thanks!",
    "are you there?",
)

# How a user statement sits in a message. {request} is the task of the session.
FRAMES = (
    "{request}. {say}",
    "{say}. {request}",
    "{request} ({say})",
    "{request}\n\n{say}",
    "{request}, {say}",
)
LATER_FRAMES = ("{say}", "also {say}", "oh and {say}", "{say}. keep going")
