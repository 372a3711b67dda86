"""Shared fixtures for the job page's tests: synthetic run directories, a real server on loopback, Chromium.

The browser is Debian's chromium driven through chromedriver (scripts/install.sh installs both). Where they
are missing the browser tests are skipped, except under CI (CI=true), where that is a failure.
Set AGENTRL_UI_SHOTS=/some/dir to keep screenshots of what the browser saw.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from agentrl.ui.synthetic import write_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture
def runs_root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("AGENTRL_HOME", str(tmp_path / "home"))
    root = tmp_path / "runs"
    write_run(root / "alpha", steps=12, total=20)
    write_run(root / "done", steps=6, total=6, seed=1)
    write_run(root / "split", steps=10, total=10, seed=2, split=True)  # validation as lines of its own
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """The real app under uvicorn in a thread, on a free loopback port."""

    def __init__(self, root: Path) -> None:
        import uvicorn

        from agentrl.ui.app import create_app

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.server = uvicorn.Server(uvicorn.Config(create_app(root), host="127.0.0.1", port=self.port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "the job page did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def live_server(runs_root):
    server = LiveServer(runs_root)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        msg = "chromium and chromedriver are not installed (scripts/install.sh installs them as root with apt-get)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,2000", "--disable-extensions"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def shot(driver, name: str) -> None:
    folder = os.environ.get("AGENTRL_UI_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / f"{name}.png"))


def wait_until(fn, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    from selenium.common.exceptions import StaleElementReferenceException

    while time.monotonic() < deadline:
        try:
            last = fn()
        except StaleElementReferenceException:  # the page redrew that part between find and read: read again
            last = None
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")
