"""`consolidator ui` as a process on the README's demo home: its first line is the URL to open,
token included; that URL opens the Projects page; `--read-only` refuses a change; Ctrl-C
stops it cleanly; a port already taken is a usage error."""

from __future__ import annotations

import http.cookiejar
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.cli_process import CLI, clean_env, run_command

pytestmark = pytest.mark.slow


@contextmanager
def viewer(home: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    with subprocess.Popen(
        [*CLI, "ui", "--port", "0", *args],
        env=clean_env(CONSOLIDATOR_HOME=str(home)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            first_line = process.stdout.readline().strip()
            yield first_line, process
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )


def test_the_first_line_is_the_url_that_opens_the_projects(home_with_memory: Path) -> None:
    with viewer(home_with_memory) as (url, process):
        parts = urlsplit(url)
        assert parts.scheme == "http" and parts.hostname == "127.0.0.1"
        assert parts.query.startswith("token=") and len(parts.query) > 30

        with opener().open(url, timeout=30) as page:
            assert page.status == 200
            assert "token=" not in page.url
            html = page.read().decode()
        assert "<h1>Projects</h1>" in html and "/home/dev/projects/billing-api" in html

        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{parts.port}/", timeout=30)
        assert refused.value.code == 403
        refused.value.close()

        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
        assert process.stderr is not None
        assert "Traceback" not in process.stderr.read()


def test_read_only_refuses_a_change(home_with_memory: Path) -> None:
    with viewer(home_with_memory, "--read-only") as (url, _process):
        port = urlsplit(url).port
        browser = opener()
        with browser.open(url, timeout=30) as page:
            assert "read-only" in page.read().decode()
        change = urllib.request.Request(
            f"http://127.0.0.1:{port}/clear-all",
            data=b"confirmed=yes",
            headers={"Origin": f"http://127.0.0.1:{port}"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            browser.open(change, timeout=30)
        assert refused.value.code == 403
        refused.value.close()
    shown = run_command(
        [*CLI, "show"], clean_env(CONSOLIDATOR_HOME=str(home_with_memory)), timeout=120
    )
    assert "billing-api" in shown.stdout


def test_a_port_already_taken_is_a_usage_error(home: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = str(taken.getsockname()[1])
        result = run_command(
            [*CLI, "ui", "--port", port],
            clean_env(CONSOLIDATOR_HOME=str(home)),
            timeout=120,
            expect=2,
        )
    finally:
        taken.close()
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
