"""The context-precision part of the quality benchmark: a gold file that judges every entry,
and a scorer that counts noise, false entries, lost useful ones and unjudged ones."""

from __future__ import annotations

from bench.quality_precision import classify, load_gold, score


def test_the_gold_file_judges_each_entry_once_with_a_reason() -> None:
    gold = load_gold()
    assert gold
    assert {item["class"] for item in gold} <= {"useful", "noise", "wrong"}
    assert all(item["why"] and item["cwd"] for item in gold)
    keys = [(item["cwd"], item["text"]) for item in gold]
    assert len(keys) == len(set(keys))


def test_shown_lines_are_judged_by_their_text_whatever_label_follows() -> None:
    gold = [{"cwd": "/p", "text": "the api port is 3301", "class": "useful", "why": "x"}]
    assert classify(gold, "/p", "- the api port is 3301 [the user said, seen 2026-01-02]") == (
        "useful"
    )
    assert classify(gold, "/q", "- the api port is 3301") == "unclassified"


def test_noise_false_entries_lost_and_unjudged_are_each_counted() -> None:
    gold = [
        {"cwd": "/p", "text": "good", "class": "useful", "why": "x"},
        {"cwd": "/p", "text": "kept", "class": "useful", "why": "x"},
        {"cwd": "/p", "text": "chatter", "class": "noise", "why": "x"},
        {"cwd": "/p", "text": "lie", "class": "wrong", "why": "x"},
    ]
    shown = {"/p": ["- good", "- chatter", "- lie", "- new"]}
    results = {r.id: r for r in score(gold, shown, {"/p": {"good", "chatter", "lie"}})}
    assert results["QC1"].figure == 1 / 3
    assert results["QC2"].figure == 1
    assert results["QC3"].figure == 0.5
    assert results["QC4"].data["unclassified"] == ["/p: - new"]
