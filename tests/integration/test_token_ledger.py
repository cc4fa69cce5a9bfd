"""The daily token budget's ledger on SQLite and PostgreSQL: a reservation is taken only while
the day's total stays within the budget, however many workers reserve at once, and settling
trades it for what the call spent, kept per day and phase."""

from __future__ import annotations

import threading
from datetime import date

from consolidator.backends.base import Usage
from consolidator.backends.token_budget import BudgetSpent, DailyBudget, today
from consolidator.db.store import Store

DAY = date(2026, 12, 6)


def test_a_reservation_past_the_budget_is_refused_and_settling_frees_the_rest(
    store: Store,
) -> None:
    ledger = store.tokens
    assert ledger.reserve(DAY, 600, 1000)
    assert not ledger.reserve(DAY, 500, 1000)
    assert ledger.spent_on(DAY) == 600
    ledger.settle(DAY, "stage1", 600, Usage(250, 50, 1))
    assert ledger.spent_on(DAY) == 300
    assert ledger.reserve(DAY, 700, 1000)
    ledger.settle(DAY, "phase2", 700, Usage(100, 20, 1))
    rows = {(row.day, row.phase): row for row in ledger.by_day(7)}
    assert rows[("2026-12-06", "stage1")].input_tokens == 250
    assert rows[("2026-12-06", "phase2")].output_tokens == 20
    assert ledger.spent_on(DAY) == 420


def test_workers_reserving_at_once_never_pass_the_budget(store: Store) -> None:
    ledger = store.tokens
    granted: list[bool] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(10):
            taken = ledger.reserve(DAY, 100, 2500)
            with lock:
                granted.append(taken)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert granted.count(True) == 25
    assert ledger.spent_on(DAY) == 2500


def test_a_call_that_does_not_fit_today_names_the_figure_and_when_work_resumes(
    store: Store,
) -> None:
    budget = DailyBudget(store.tokens, 1000)
    day = budget.reserve(900)
    budget.settle(day, "stage_one", 900, Usage(900, 50, 1))
    try:
        budget.reserve(200)
    except BudgetSpent as exc:
        message = str(exc)
    else:
        raise AssertionError("a reservation past the budget was granted")
    assert "950 of 1000 tokens" in message and "00:00 UTC" in message
    assert store.tokens.spent_on(today()) == 950


def test_no_work_is_claimed_once_not_even_the_smallest_call_fits(store: Store) -> None:
    budget = DailyBudget(store.tokens, 10_000)
    day = budget.reserve(9_000)
    budget.settle(day, "consolidation", 9_000, Usage(7_000, 500, 1))
    budget.check_room(2_000)
    try:
        budget.check_room(3_000)
    except BudgetSpent as exc:
        assert "7500 of 10000 tokens" in str(exc)
    else:
        raise AssertionError("the pass would claim work no call can do today")
    rows = store.tokens.by_day(1)
    assert [(row.phase, row.input_tokens, row.calls) for row in rows] == [("phase2", 7_000, 1)]
