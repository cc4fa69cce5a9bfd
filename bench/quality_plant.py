"""The planted facts that span sessions: changed values, corrections, defaults, and noise.

A changed value is said in the first half of the period and replaced in the second, in words
or only by a file edit in a tool call (`requires-python` in `pyproject.toml`, `.nvmrc`, a port
in a config file, a renamed script). A correction revokes an earlier statement in a later
session, giving the new value or dropping the rule. A default is said as general in one
project, or plainly in two; a rule tied to one project's broken environment stays there.
Questions and acknowledgements are noise that must never become a fact or a preference.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta

from bench import quality_language as say
from bench.quality_corpus import (
    DAYS,
    FORMATTERS,
    HOME,
    LINT_COMMANDS,
    ONE_OFF_KINDS,
    PACKAGES,
    PEOPLE,
    PROJECTS,
    SETTINGS,
    START,
    TOOLS,
    WORDS,
    Corpus,
    Patch,
    PlantedFact,
    Planter,
    Said,
    Session,
    ToolStep,
    _background,
    _uuid,
)
from bench.quality_language import Phrasing


def _recurring(planter: Planter, index: int, name: str, cwd: str) -> list[PlantedFact]:
    rng = planter.rng
    values = {
        "gate": {"cmd": LINT_COMMANDS[index]},
        "port": {"port": str(5433 + index * 7), "topic": "dev", "file": "docker-compose.yml"},
        "path": {
            "path": f"tests/fixtures/{name}-cases",
            "topic": "integration",
            "file": "tests/conftest.py",
        },
        "knowledge": {"setting": SETTINGS[index], "file": f"src/{name}/client.py"},
    }
    keys = {"gate": LINT_COMMANDS[index], "port": values["port"]["port"]}
    keys |= {"path": values["path"]["path"], "knowledge": SETTINGS[index]}
    facts = []
    for kind, fields in values.items():
        fact = PlantedFact(f"{name}:{kind}", "recurring", kind, cwd, (keys[kind],))
        for session in planter.pick(rng.randrange(5, 21)):
            planter.put(fact, session, planter.phrasing(say.FACT_PHRASINGS[kind]), **fields)
        facts.append(fact)
    package = PACKAGES[index]
    module = package.split("-")[0].replace("py", "") or package
    failure = PlantedFact(f"{name}:failure", "recurring", "failure", cwd, (package,))
    for session in planter.pick(rng.randrange(5, 21)):
        command = "python -m pytest tests -q"
        error = (
            "Traceback (most recent call last):\n  ...\n"
            f"ModuleNotFoundError: No module named '{module}'"
        )
        session.steps[1:1] = [
            ToolStep(command, error, 1),
            ToolStep(f"pip install {package}", f"Successfully installed {package}", 0),
            ToolStep(command, "12 passed in 1.2s", 0),
        ]
        failure.said.append(Said(session.thread_id, "failure/tool", "tool", command))
    return [*facts, failure]


def _home(planter: Planter) -> list[PlantedFact]:
    path = "~/src/dotfiles-stow"
    dotfiles = PlantedFact("home:dotfiles", "recurring", "path", HOME, ("dotfiles-stow",))
    for session in planter.pick(planter.rng.randrange(5, 12)):
        planter.put(dotfiles, session, planter.phrasing(say.HOME_PHRASINGS), path=path)
    fish = PlantedFact("home:fish", "recurring", "default", HOME, ("fish",))
    fields = {"verb": "write shell snippets for", "tool": "fish", "other": "bash"}
    for session in planter.pick(planter.rng.randrange(5, 12)):
        planter.put(fish, session, planter.phrasing(say.DEFAULT_PHRASINGS), **fields)
    return [dotfiles, fish]


def _one_off(
    planter: Planter, name: str, cwd: str, number: int, kind: str, phrasing: Phrasing
) -> PlantedFact:
    rng = planter.rng
    topic = rng.choice(WORDS)
    unique = f"{number}{len(name)}"
    fields: dict[str, str] = {"topic": topic, "file": f"src/{topic}/settings.py"}
    if kind == "host":
        fields["host"] = f"{topic}-{unique}.{name}.internal"
        keys: tuple[str, ...] = (fields["host"],)
    elif kind == "version":
        fields |= {
            "tool": TOOLS[number % len(TOOLS)],
            "version": f"1.{len(name)}{number}.{rng.randrange(1, 9)}",
        }
        keys = (fields["tool"], fields["version"])
    elif kind == "person":
        fields["handle"] = f"@{PEOPLE[(number + len(name)) % len(PEOPLE)]}-{name}"
        keys = (fields["handle"],)
    elif kind == "ticket":
        fields["ticket"] = f"{name[:4].upper()}-{400 + number * 37}"
        keys = (fields["ticket"],)
    elif kind == "convention":
        fields["tag"] = f"{name}-{topic}"
        keys = (fields["tag"],)
    elif kind == "path":
        fields["path"] = f"tests/data/{topic}-{unique}"
        keys = (fields["path"],)
    elif kind == "command":
        fields["cmd"] = f"make gen-{topic}{unique}"
        keys = (fields["cmd"],)
    else:
        fields["port"] = str(7000 + len(name) * 100 + number * 7)
        keys = (fields["port"],)
    fact = PlantedFact(f"{name}:once-{kind}-{number}", "one_off", kind, cwd, keys)
    (session,) = planter.pick(1)
    planter.put(fact, session, phrasing, **fields)
    return fact


def generate(sessions_total: int, seed: int = 7) -> Corpus:
    """About `sessions_total` sessions (at least 8 a folder), facts planted in them."""
    rng = random.Random(seed)
    cwds = [HOME, *(cwd for _, cwd in PROJECTS)]
    per_cwd = max(8, -(-sessions_total // len(cwds)))
    sessions: list[Session] = []
    facts: list[PlantedFact] = []
    planters: dict[str, Planter] = {}
    one_offs: Counter[str] = Counter()
    for cwd_index, cwd in enumerate(cwds):
        own = [_session(rng, cwd, number, per_cwd) for number in range(per_cwd)]
        # Sessions with nothing worth keeping: about 6%, never carrying a fact.
        for index in rng.sample(range(len(own)), max(1, len(own) // 16)):
            own[index].nothing = True
            own[index].opening = rng.choice(say.NOTHING_OPENINGS)
            own[index].steps = [] if rng.random() < 0.5 else [ToolStep("git status", "clean", 0)]
            own[index].final = "Hi! What would you like to work on?"
        planter = Planter(rng, own)
        planters[cwd] = planter
        if cwd_index == 0:
            name = "home"
            facts += _home(planter)
        else:
            name = PROJECTS[cwd_index - 1][0]
            facts += _recurring(planter, cwd_index - 1, name, cwd)
        facts.append(plant_changes(planter, cwd_index, name, cwd))
        if cwd_index:
            facts += plant_corrections(planter, cwd_index - 1, name, cwd)
        for number in range(6):
            kind = ONE_OFF_KINDS[(cwd_index * 3 + number) % len(ONE_OFF_KINDS)]
            pool = say.FACT_PHRASINGS[kind]
            phrasing = pool[one_offs[kind] % len(pool)]
            one_offs[kind] += 1
            facts.append(_one_off(planter, name, cwd, number, kind, phrasing))
        facts += plant_noise(planter, cwd_index, name, cwd)
        sessions.extend(own)
    facts += plant_defaults(planters)
    sessions.sort(key=lambda s: s.started)
    return Corpus(sessions, facts)


def _session(rng: random.Random, cwd: str, number: int, per_cwd: int) -> Session:
    started = START + timedelta(days=DAYS * number / per_cwd, seconds=rng.randrange(6 * 3600))
    opening, steps, final = _background(rng)
    return Session(_uuid(rng), cwd, started, rng.random() < 0.15, opening, [], steps, final)


def _edit(session: Session, patch: Patch) -> None:
    """The agent's edit, placed after the first read of the session."""
    target = patch.move_to or patch.path
    output = f"Success. Updated the following files:\nM {target}"
    session.steps.insert(1, ToolStep(f"apply_patch {patch.path}", output, 0, patch))


def _old_and_new(cwd_index: int, name: str) -> tuple[str, dict[str, str], Patch | None]:
    """A changed fact's subject, its fields (old, new, and what the old statement needs), and
    the file edit that shows the change (None: said in words only)."""
    variant = cwd_index % 5
    if variant == 0:
        old, new = str(6500 + cwd_index * 10), str(6501 + cwd_index * 10)
        fields = {"old": old, "new": new, "kind": "port", "port": old, "topic": "reporting"}
        return (
            "reporting db port",
            fields,
            Patch("config/database.yml", f"  port: {old}", f"  port: {new}"),
        )
    if variant == 1:
        minor = 8 + 2 * (cwd_index // 5)
        old, new = f"3.{minor}", f"3.{minor + 1}"
        fields = {"old": old, "new": new, "kind": "version", "tool": "python", "version": old}
        line = 'requires-python = ">={}"'
        return "python version", fields, Patch("pyproject.toml", line.format(old), line.format(new))
    if variant == 2:
        old, new = ("18.19.0", "20.11.1") if cwd_index < 5 else ("20.9.0", "22.3.0")
        fields = {"old": old, "new": new, "kind": "version", "tool": "node", "version": old}
        return "node version", fields, Patch(".nvmrc", old, new)
    if variant == 3:
        old, new = f"scripts/deploy_{name}.sh", f"tools/release_{name}.sh"
        fields = {"old": old, "new": new, "kind": "script", "what": "deploy"}
        return "deploy script", fields, Patch(old, "# deploy", "# release", move_to=new)
    old, new = f"cache-a.{name}.internal", f"cache-b.{name}.internal"
    fields = {"old": old, "new": new, "kind": "host", "host": old, "topic": "cache"}
    return "cache host", fields, None


def plant_changes(planter: Planter, cwd_index: int, name: str, cwd: str) -> PlantedFact:
    """A value said early, replaced half-way: in words, or by an edit with vague words only
    (Python and Node versions: the new value is in the edit alone)."""
    subject, fields, patch = _old_and_new(cwd_index, name)
    kind = fields["kind"]
    old_pool = say.SCRIPT_PHRASINGS if kind == "script" else say.FACT_PHRASINGS[kind]
    old_said = PlantedFact(f"{name}:was-{subject}", "changed", kind, cwd, ())
    for session in planter.pick(planter.rng.randrange(3, 7), before=0.5):
        phrasing = planter.phrasing(old_pool, voice="user")
        planter.put(old_said, session, phrasing, **fields)
    fact = PlantedFact(
        f"{name}:{subject.replace(' ', '-')}",
        "changed",
        kind,
        cwd,
        (fields["new"],),
        (fields["old"],),
    )
    fact.said.extend(old_said.said)
    edit_only = kind == "version"
    for number, session in enumerate(planter.pick(planter.rng.randrange(3, 7), after=0.5)):
        shown = patch is not None and (edit_only or number % 2 == 0)
        # "we're on the new version now" only where the value is a version.
        by_edit = say.CHANGE_BY_EDIT_PHRASINGS[0 if edit_only else 1 :]
        pool = by_edit if shown and (edit_only or number % 4 == 0) else say.CHANGE_PHRASINGS
        phrasing = planter.phrasing(pool)
        text = phrasing.text.format(subject=subject, new=fields["new"])
        where = planter.rng.choice(("opening", "later"))
        planter.put_user(session, text, where)
        if shown and patch is not None:
            _edit(session, patch)
        label = f"{phrasing.phrasing_id}+edit" if shown else phrasing.phrasing_id
        fact.said.append(Said(session.thread_id, label, where, text))
    return fact


def plant_corrections(planter: Planter, index: int, name: str, cwd: str) -> list[PlantedFact]:
    """A value corrected and a rule dropped, each in a later session than the statement."""
    rng = planter.rng
    if index % 2 == 0:
        subject, kind, pool = "build script", "command", say.SCRIPT_PHRASINGS
        old, new = f"make build-{name}", f"tools/build_{name}.sh"
        fields = {"old": old, "what": "build"}
    else:
        subject, kind, pool = "staging host", "host", say.FACT_PHRASINGS["host"]
        old, new = f"stage1.{name}.internal", f"stage2.{name}.internal"
        fields = {"host": old, "topic": "api", "file": f"src/{name}/deploy.py"}
    value = PlantedFact(f"{name}:corrected-{kind}", "corrected", kind, cwd, (new,), (old,))
    for session in planter.pick(rng.randrange(2, 5), before=0.6):
        planter.put(value, session, planter.phrasing(pool, voice="user"), **fields)
    correction = say.CORRECTION_PHRASINGS[index % len(say.CORRECTION_PHRASINGS)]
    _correct(planter, value, correction, subject=subject, old=old, new=new)

    tool = FORMATTERS[index]
    dropped = PlantedFact(f"{name}:dropped-{tool}", "corrected", "rule", cwd, (), (tool,))
    for session in planter.pick(rng.randrange(2, 5), before=0.6):
        planter.put(dropped, session, planter.phrasing(say.RULE_PHRASINGS), tool=tool)
    drop = say.DROP_PHRASINGS[index % len(say.DROP_PHRASINGS)]
    _correct(planter, dropped, drop, tool=tool)
    return [value, dropped]


def _correct(planter: Planter, fact: PlantedFact, phrasing: Phrasing, **fields: str) -> None:
    (session,) = planter.pick(1, after=0.7)
    text = phrasing.text.format(**fields)
    where = planter.rng.choice(("opening", "later"))
    planter.put_user(session, text, where)
    fact.said.append(Said(session.thread_id, phrasing.phrasing_id, where, text))


# Defaults: (verb, tool, other), the projects they are said in, and whether said as general.
DEFAULTS = (
    ("use", "pnpm", "npm", ("shop",), True),
    ("write commit messages in", "the imperative", "past tense", ("billing", "blog"), False),
    ("use", "httpx", "requests", ("ml",), True),
    ("push with", "--force-with-lease", "plain --force", ("infra", "platform"), False),
)
LOCAL_RULES = (("auth", "--no-migrations"), ("docs", "--reuse-db-snapshot"))
KEY_WORD = {"the imperative": "imperative"}


def plant_defaults(planters: dict[str, Planter]) -> list[PlantedFact]:
    cwd_of = dict(PROJECTS)
    facts = []
    for verb, tool, other, names, general in DEFAULTS:
        cwds = tuple(cwd_of[n] for n in names)
        key = KEY_WORD.get(tool, tool)
        fact = PlantedFact(f"default:{key}", "default", "default", cwds[0], (key,), cwds=cwds)
        for cwd in cwds:
            planter = planters[cwd]
            for session in planter.pick(planter.rng.randrange(2, 4)):
                phrasing = planter.phrasing(say.DEFAULT_PHRASINGS)
                text = phrasing.text.format(verb=verb, tool=tool, other=other)
                if general:
                    frames = [f for f in say.GENERAL_FRAMES if f.startswith("{say}")]
                    frame = planter.rng.choice(frames if phrasing.cue else say.GENERAL_FRAMES)
                    text = say.fill(frame, say=text)
                where = planter.rng.choice(("opening", "later"))
                planter.put_user(session, text, where)
                label = f"{phrasing.phrasing_id}+general" if general else phrasing.phrasing_id
                fact.said.append(Said(session.thread_id, label, where, text))
        facts.append(fact)
    for name, flag in LOCAL_RULES:
        cwd = cwd_of[name]
        planter = planters[cwd]
        fact = PlantedFact(f"local:{name}", "local_rule", "default", cwd, (flag,), cwds=(cwd,))
        for session in planter.pick(planter.rng.randrange(2, 4)):
            planter.put(fact, session, planter.phrasing(say.LOCAL_PHRASINGS), tool=flag)
        facts.append(fact)
    return facts


def plant_noise(planter: Planter, cwd_index: int, name: str, cwd: str) -> list[PlantedFact]:
    """Questions (two a folder, some as the whole request) and acknowledgements."""
    rng = planter.rng
    facts = []
    for number, word in enumerate(rng.sample(WORDS, 2)):
        phrasing = say.QUESTIONS[(cwd_index * 2 + number) % len(say.QUESTIONS)]
        topic = f"{word}-{name}"
        text = phrasing.text.format(topic=topic)
        fact = PlantedFact(f"{name}:question-{number}", "question", "question", cwd, (topic,))
        (session,) = planter.pick(1)
        if number == 0:
            session.opening, where = f"{text} {session.opening}", "opening"
        else:
            session.later.insert(0, text)
            where = "later"
        fact.said.append(Said(session.thread_id, phrasing.phrasing_id, where, text))
        facts.append(fact)
    for index in planter.usable:
        if rng.random() < 0.4:
            planter.own[index].later.append(rng.choice(say.ACKNOWLEDGEMENTS))
    return facts
