"""Secrets written so that no shape detector sees them: named in a sentence, carried by a signed
URL, encoded in base64 or hex, split by an invisible character, or a key's body without its frame.
Each must be gone from the redacted text; text that only talks about secrets must stay."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from consolidator.security.redaction import redact
from consolidator.security.spans import PLACEHOLDER

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Wt3RkQa"
OPENAI_KEY = "sk-proj-" + "Qm9vN2xhZ3Rlc3Rrb3pFeUFiQ2RlRmdIaUprTG1Ob1BxUnNUdVZ3WHla"
GITHUB_TOKEN = "ghp_" + "R8xkVv2mQ9tLz4Wn7bHc1Jd5Fg3Ks6Ya0PeT"

CREDENTIALS_FILE = (
    f"[default]\naws_access_key_id = AKIAQ7XK2M4RZT6WYB3N\naws_secret_access_key = {AWS_SECRET}\n"
)
KEY_BODY = "\n".join(
    base64.b64encode(bytes((line * 48 + i) % 256 for i in range(48))).decode() for line in range(5)
)

_CREDENTIALS_HEX = CREDENTIALS_FILE.encode().hex()
CREDENTIALS_HEX_LINES = [_CREDENTIALS_HEX[i : i + 60] for i in range(0, len(_CREDENTIALS_HEX), 60)]

HIDDEN = {
    "password said in prose": ("the DB password is hunter2hunter2, keep it", "hunter2hunter2"),
    "token after a colon": ("staging token: Zx81kq0PLmv7Q", "Zx81kq0PLmv7Q"),
    "pw shorthand": ("pw Tr0ub4dor&3 for the admin panel", "Tr0ub4dor&3"),
    "bare AWS secret after 'secret is'": (f"the secret is {AWS_SECRET}", AWS_SECRET),
    "signed URL": (
        "curl 'https://b.s3.amazonaws.com/x.tar?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Signature=9f2c4e1a7b3d5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8'",
        "9f2c4e1a7b3d5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8",
    ),
    "base64 credentials file": (
        "cat ~/.aws/credentials | base64\n"
        + base64.encodebytes(CREDENTIALS_FILE.encode()).decode(),
        base64.b64encode(CREDENTIALS_FILE.encode()).decode()[:40],
    ),
    "hex dump of a credentials file": (
        "xxd -p ~/.aws/credentials\n" + "\n".join(CREDENTIALS_HEX_LINES),
        CREDENTIALS_HEX_LINES[1],
    ),
    "hex of a token on one line": (
        f"echo {GITHUB_TOKEN.encode().hex()} | xxd -r -p",
        GITHUB_TOKEN.encode().hex(),
    ),
    "key body without its frame": (f"here is the key:\n{KEY_BODY}\n", KEY_BODY.split()[2]),
    "soft hyphen inside a key": (
        f"export OPENAI_API_KEY={OPENAI_KEY[:20]}\u00ad{OPENAI_KEY[20:]}",
        OPENAI_KEY[20:],
    ),
    "zero-width space inside a token": (
        f"use {GITHUB_TOKEN[:12]}\u200b{GITHUB_TOKEN[12:]} for the bot",
        GITHUB_TOKEN[12:],
    ),
}


@pytest.mark.parametrize("text, secret", HIDDEN.values(), ids=HIDDEN.keys())
def test_a_hidden_secret_is_redacted(text: str, secret: str) -> None:
    redacted = redact(text).text
    assert secret not in redacted
    assert PLACEHOLDER in redacted


BENIGN = [
    "The password is stored in the vault, never in the repository.",
    "Reset the password via the admin page.",
    "the token is refreshed every hour by the auth middleware",
    "The API key is read from OPENAI_API_KEY at start-up.",
    "secret: ${{ secrets.DEPLOY_KEY }}",
    "password = <your password here>",
    "max_tokens: 8000",
    "the access key is rotated monthly",
    "git log --format=%H | head -n 40 > /home/dev/projects/app/src/lambda/schema/commits.txt",
    "sha256 9f2c4e1a7b3d5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8 is the digest",
    "git checkout 3f1d2c9a8b7e6f5a4d3c2b1a0f9e8d7c6b5a4f3e",
    f"the commit message in hex: {b'Fix the flaky export test in the nightly job'.hex()}",
    "pw reset needs the user's email",
    "Notes for the reviewer: naïve café résumé, nothing hidden here.",
]


@pytest.mark.parametrize("text", BENIGN)
def test_text_about_secrets_is_kept(text: str) -> None:
    assert redact(text).text == text


# Real sessions whose tool outputs print secret-shaped strings of the repository they read
# (its secret scanner's own tests, an `apiKey: '...'` placeholder, a `highEntropySecret`
# constant whose value the publisher already replaced): redacting those is right, and a
# string of them may change only where it holds one of them.
SECRET_SHAPED: dict[str, tuple[str, ...]] = {
    "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl": (
        "'sk-ant-'",
        "'REDACTED_API_KEY'",
        "apiKey: 'proxy-handled'",
    ),
    "5c187f31-7d9e-49c6-86b2-206d3023f675.jsonl": (
        "config.apiKey = 'aws-profile'",
        "config.awsSecretAccessKey = credentials",
        ": proxy-ha***dled",
        "AWS_ACCESS_KEY_ID: 'AKIAXXXXXXXXXXXXXXXX'",
    ),
    "a1f75e0f-ecc5-4f62-be3d-336b8f0b3928.jsonl": ("apiKey: 'sso-provided'",),
    "768de5d6-9fad-475b-8a4f-dfa7ddc01bb0.jsonl": (
        'highEntropySecret = "[REDACTED]"',
        '"token=" + highEntropySecret',
    ),
}


def test_the_real_sessions_lose_nothing_to_the_hidden_forms() -> None:
    """The real session files hold no secret: every string in them survives redaction."""
    real = Path(__file__).parents[1] / "fixtures" / "real"
    changed = []
    for path in sorted(real.rglob("*.jsonl")):
        shaped = SECRET_SHAPED.get(path.name, ())
        for line in path.read_text(encoding="utf-8").splitlines():
            for text in _strings(json.loads(line)) if line.strip() else []:
                secret_shaped = any(marker in text for marker in shaped)
                if len(text) >= 6 and redact(text).text != text and not secret_shaped:
                    changed.append((path.name, text[:120]))
    assert changed == []


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []
