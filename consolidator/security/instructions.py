"""Instruction-shaped text: words addressed to a later agent that would act as its orders.

Memory is injected into every later session, so a note or session that tells the reader to
drop its instructions, relax its safety behaviour, run a downloaded script, send data to an
outside address, force-push, or that carries chat role markers or the closing tag of the block
it sits in, is an attack on every later session. The patterns run on folded text (see
`fold.folded`) and describe the shapes of such orders, not fixed phrasings; a negated command
("never run git push --force") is a rule the user keeps, not an order to break it.
"""

from __future__ import annotations

import re
from typing import Final

from consolidator.security.patterns import ThreatPattern, threat_pattern

_NEGATION: Final = re.compile(
    r"\b(?:never|not|don't|dont|avoid|no|without|stop|instead\s+of|rather\s+than|forbid\w*|"
    r"prohibit\w*|disallow\w*)\b[^.;!?\n]*$",
    re.IGNORECASE,
)


def _not_negated(match: re.Match[str]) -> bool:
    """Whether the sentence before `match` does not forbid what it shows."""
    line_start = match.string.rfind("\n", 0, match.start()) + 1
    before = match.string[max(line_start, match.start() - 120) : match.start()]
    return _NEGATION.search(before) is None


_SHARED_BRANCH: Final = re.compile(
    r"(?:^|[:/+])(?:main|master|trunk|develop|dev|prod\w*|production|release\S*|stable|head)$"
)
_COMMAND_END: Final = re.compile(r"[\n;|&`]|\s(?:and|then|after|before|when|if)\s")


def _overwrites_shared_history(match: re.Match[str]) -> bool:
    """Whether a forced push rewrites what others share: every branch (`--all`, `--mirror`),
    a shared-looking branch (main, develop, release...), or whatever the default is when no
    branch is named. Force-pushing one's own feature branch, or `--force-with-lease` to the
    default, is ordinary work after a rebase."""
    text = match.string
    end = _COMMAND_END.search(text, match.start())
    words = text[match.start() : end.start() if end else len(text)].split()[2:]
    options = [word for word in words if word.startswith("-")]
    if any(option in ("--all", "--mirror") for option in options):
        return True
    refspecs = [word.strip("'\".,") for word in words if not word.startswith("-")][1:]
    if refspecs:
        return any(_SHARED_BRANCH.search(spec.lower()) for spec in refspecs)
    return not any(option.startswith("--force-with-lease") for option in options)


_DROP = (
    r"(?:ignore|disregard|forget|discard|drop|abandon|scrap|override|overrule|cancel|void|"
    r"set\s+aside|put\s+aside|throw\s+(?:out|away)|pay\s+no\s+(?:attention|heed|mind)\s+to|"
    r"(?:do\s+not|don't|stop)\s+(?:follow(?:ing)?|obey(?:ing)?|listen(?:ing)?\s+to))"
)
_DROP_NEEDLES = (
    *("ignore", "disregard", "forget", "discard", "drop ", "abandon", "scrap", "overr"),
    *("cancel", "void", "aside", "throw", "pay no", "obey", "t follow", "p follow", "listen"),
)
_GUIDANCE = (
    r"(?:instructions?|guidance|guidelines?|directions?|directives?|rules?|orders?|prompts?|"
    r"programming|constraints?|polic(?:y|ies)|restrictions?|commands?|context|messages?)"
)
_EARLIER = (
    r"(?:previous|prior|earlier|preceding|foregoing|above|original|initial|existing|old|"
    r"system|developer|safety|standing|default)"
)
_WHAT_YOU_WERE_TOLD = (
    r"(?:what(?:ever)?|everything|anything|all(?:\s+that)?)\s+(?:you\s+(?:were|have\s+been|'ve"
    r"\s+been|got)|(?:was|has\s+been)\s+)\s*(?:told|given|instructed|taught|asked|said)"
)
_ABOVE = r"(?:the\s+)?(?:above|preceding|foregoing)|everything\s+(?:above|before|so\s+far|prior)"
_SHELL = r"(?:sudo\s+(?:-\S+\s+)*)?(?:ba|z|k|da|c|tc|fi)?sh|python[23]?|perl|ruby|node|php|iex"
_DOWNLOAD = r"(?:curl|wget|fetch|iwr|irm|invoke-webrequest|invoke-restmethod|http|aria2c)"
_SENSITIVE = (
    r"(?:secrets?|api[ _-]?keys?|keys?|tokens?|credentials?|passwords?|passwd|passphrases?|"
    r"\.env|env(?:ironment)?(?:\s+var(?:iable)?s)?|ssh\s+keys?|private\s+keys?|cookies?|"
    r"session(?:s|\s+ids?)?|contents\s+of|source\s+code|database|dump|history|logs?)"
)
_SEND = (
    r"(?:send|e-?mail|mail|post|upload|forward|transmit|exfiltrate|leak|share|copy|paste|"
    r"submit|sync|push|beam|report|deliver)"
)
_OUTSIDE = r"(?:[\w.+-]+@[\w-]+(?:\.[\w-]+)+|(?:https?|ftp|wss?)://\S+)"
_PROMPT_TAGS = (
    r"(?:system|assistant|developer|user|human|instructions?|memory|memories|context|prompt|"
    r"tool_?(?:call|result|use|output)s?|function_(?:calls|results)|document|im_(?:start|end)|"
    r"user_query|admin|consolidator[\w-]*)"
)

INSTRUCTION_PATTERNS: Final[tuple[ThreatPattern, ...]] = (
    threat_pattern(
        "injection",
        "instructions dropped",
        rf"\b{_DROP}\b[^.!?\n]{{0,50}}?(?:\b{_EARLIER}\s+(?:\w+\s+){{0,2}}{_GUIDANCE}\b|"
        rf"\b{_WHAT_YOU_WERE_TOLD}\b|\b{_GUIDANCE}\s+(?:you\s+(?:were|have\s+been|'ve\s+been)\s+"
        rf"(?:given|told|taught)|(?:given|set)\s+(?:to\s+you|at\s+the\s+start))|(?:{_ABOVE})\b)",
        *_DROP_NEEDLES,
    ),
    threat_pattern(
        "injection",
        "instructions declared void",
        rf"\b(?:{_EARLIER}|everything\s+(?:above|before)(?:\s+this\s+(?:line|point|message))?)"
        rf"(?:\s+{_GUIDANCE})?\s+(?:is|are)\s+(?:now\s+)?(?:void|null|cancell?ed|obsolete|"
        r"outdated|superseded|revoked|invalid|no\s+longer\s+valid)\b"
        r"|\b(?:anything|everything|whatever)\s+the\s+user\s+(?:said|told\s+you|asked|wrote)"
        r"[^.!?\n]{0,30}\bno\s+longer\s+(?:applies|matters|counts)\b",
        *("void", "cancel", "obsolete", "outdated", "supersed", "revoked", "no longer valid"),
        *("no longer appl", "no longer matter", "no longer count"),
    ),
    threat_pattern(
        "injection",
        "new orders for the agent",
        r"\b(?:your|these\s+are\s+your|here\s+are\s+your)\s+(?:real|true|actual|new|updated|"
        r"secret|hidden)\s+(?:instructions|orders|directives|task|mission|objective|goal|rules)"
        r"\b|\bact\s+only\s+on\b|\bobey\b|\bdo\s+(?:exactly\s+)?as\s+(?:this|the|my)\s+"
        r"(?:note|memory|message|author)\b|\bfollow\s+(?:only\s+)?(?:these|my|the\s+following)"
        r"\s+(?:instructions|directives|orders)\s+(?:instead|only)\b",
        *("your", "obey", "act only", "as this", "as the", "as my", "follow"),
    ),
    threat_pattern(
        "injection",
        "system prompt extraction",
        r"\b(?:reveal|print|show|leak|output|repeat|dump|display|disclose|recite|tell\s+me)\s+"
        r"(?:me\s+)?(?:your|the)\s+(?:(?:full|entire|hidden|initial|original|secret)\s+)*"
        r"(?:system\s+prompt|system\s+message|instructions\s+verbatim|hidden\s+instructions|"
        r"initial\s+instructions|developer\s+message)\b",
        *("system prompt", "system message", "verbatim", "hidden instr", "initial instr"),
        "developer message",
    ),
    threat_pattern(
        "injection",
        "canary output",
        r"\b(?:say|print|output|respond\s+with|reply\s+with|write|answer)\s+[\"'`]?"
        r"(?:PWNED|HACKED|I\s+have\s+been\s+(?:PWNED|hacked))\b",
        "pwned",
        "hacked",
    ),
    threat_pattern(
        "injection",
        "safety behaviour changed",
        r"\b(?:disable|turn\s+off|switch\s+off|remove|bypass|skip|lower|drop|suspend|ignore)\s+"
        r"(?:all\s+|any\s+|every\s+|the\s+|your\s+)*(?:guardrails?|safeguards?|safety\b|sandbox\w*|"
        r"content\s+(?:filters?|polic(?:y|ies))|confirmation\s+(?:prompts?|dialogs?|checks?|"
        r"steps?)|approvals?\b|permission\s+(?:checks?|prompts?))",
        *("guardrail", "safeguard", "safety", "sandbox", "content filter", "content polic"),
        *("confirmation", "approval", "permission check", "permission prompt"),
    ),
    threat_pattern(
        "injection",
        "safety behaviour changed",
        r"\b(?:never|don't|do\s+not|no\s+need\s+to)\s+ask\s+(?:the\s+user\s+)?(?:for\s+)?"
        r"(?:permission|confirmation|approval|before)\b"
        r"|\bwithout\s+asking\s+(?:the\s+user\s+)?(?:for\s+)?(?:permission|confirmation|"
        r"approval|first)\b"
        r"|\b(?:no\s+longer|don't|do\s+not)\s+need\s+(?:to\s+ask\s+for\s+)?(?:permission|"
        r"approval|confirmation)\b",
        *("ask for", "ask before", "ask the user", "without asking", "need to ask"),
        *("need permission", "need approval", "need confirmation"),
    ),
    threat_pattern(
        "injection",
        "safety behaviour changed",
        r"\b(?:safety|security|permission)\s+(?:checks?|rules?|measures?|guidelines?|prompts?)"
        r"\s+(?:are|is)\s+(?:now\s+)?(?:disabled|off|suspended|lifted|removed|not\s+needed)\b"
        r"|\bstop\s+refusing\b|\b(?:content|safety|usage)\s+polic(?:y|ies)\s+(?:do(?:es)?\s+not|"
        r"don't|no\s+longer)\s+apply\b|\b(?:every|all|any)\s+requests?\s+(?:is|are)\s+"
        r"(?:pre-?approved|authori[sz]ed)\b",
        *("disabled", "suspended", "lifted", "removed", "not needed", " off", "refusing"),
        *("apply", "approved", "authori"),
    ),
    threat_pattern(
        "injection",
        "safety behaviour changed",
        r"--dangerously-(?:skip-permissions|bypass-approvals-and-sandbox)|--yolo\b",
        "--dangerously",
        "--yolo",
    ),
    threat_pattern(
        "injection",
        "download run by a shell",
        rf"\b{_DOWNLOAD}\b[^\n|;]{{0,300}}\|\s*(?:{_SHELL})\b"
        rf"|\b(?:{_SHELL}|source|\.)\s+<\(\s*{_DOWNLOAD}\b"
        rf"|\$\(\s*{_DOWNLOAD}\b"
        r"|\biex\b\s*\(?\s*(?:\(\s*)?(?:iwr|irm|invoke-webrequest|invoke-restmethod|"
        r"new-object\s+net\.webclient)",
        *("curl", "wget", "fetch", "iwr", "irm", "invoke-", "http", "aria2c", "new-object"),
        test=_not_negated,
    ),
    threat_pattern(
        "exfiltration",
        "data sent to an outside address",
        rf"\b{_SEND}\b[^\n]{{0,100}}?\b{_SENSITIVE}[^\n]{{0,100}}?\b(?:to|with|at)\s+"
        rf"(?:\S+\s+){{0,2}}?{_OUTSIDE}",
        "@",
        "://",
        test=_not_negated,
    ),
    threat_pattern(
        "injection",
        "force push",
        r"\bgit\s+push\b[^\n;|&`]{0,120}?(?:\s--force(?:-with-lease|-if-includes)?\b|\s-[a-z]*f"
        r"[a-z]*\b|\s\+[\w/:.-]+)",
        "push",
        test=lambda match: _not_negated(match) and _overwrites_shared_history(match),
    ),
    threat_pattern(
        "injection",
        "role marker",
        r"^[ \t>*#-]*(?:system|assistant|developer)\s*(?:message|prompt)?\s*:"
        r"|\[\s*/?\s*(?:system|developer|inst|sys)\s*\]"
        r"|\b(?:human|user)\s*:[^\n]{1,300}?\bassistant\s*:",
        *("system", "assistant", "developer", "[inst", "[sys", "[/inst", "[/sys"),
        flags=re.IGNORECASE | re.MULTILINE,
    ),
    threat_pattern(
        "injection",
        "prompt block tag",
        rf"<\s*/?\s*{_PROMPT_TAGS}(?![\w-])[^<>\n]{{0,80}}>",
        "<",
    ),
)
