"""The job page in a real browser (headless Chromium): charts drawn with data, live updates, the explorer
paging through a step, and the one-file report opened offline."""

from __future__ import annotations

import json

import pytest
from selenium.webdriver.common.by import By

from agentrl.ui.report import write_report
from agentrl.ui.synthetic import append_step

from .conftest import shot, wait_until

CHARTS = ["reward", "response_length", "kl", "advantages", "tool_calls", "validation", "loss", "entropy",
          "grad_norm", "lr", "step_time"]
POINTS = "return Object.fromEntries([...document.querySelectorAll('[data-chart]')].map(e => [e.dataset.chart, +e.dataset.points]))"
# what Plotly actually drew: one SVG path or bar per trace with data
DRAWN = ("return Object.fromEntries([...document.querySelectorAll('[data-chart]')].map(e => [e.dataset.chart, "
         "e.querySelectorAll('.scatterlayer .trace path.js-line, .scatterlayer .trace .point, .barlayer .bars path').length]))")


def chart_points(driver):
    points = driver.execute_script(POINTS)
    return points if set(points) >= set(CHARTS) and all(points[c] > 0 for c in CHARTS) else None


def test_run_list_shows_every_run_with_its_status(browser, live_server):
    browser.get(live_server.url)
    rows = "return [...document.querySelectorAll('#runs tbody tr')].map(r => r.innerText)"  # read at once: polls redraw
    text = wait_until(lambda: "\n".join(r for r in browser.execute_script(rows) if "alpha" in r or "done" in r),
                      what="run rows")
    assert "alpha" in text and "resumable" in text and "12/20" in text
    assert "done" in text and "finished" in text and "6/6" in text
    shot(browser, "runs")
    browser.find_element(By.LINK_TEXT, "alpha").click()
    wait_until(lambda: "/runs/alpha" in browser.current_url, what="run page")


def test_run_page_draws_every_chart_and_updates_live(browser, live_server, runs_root):
    browser.get(live_server.url + "runs/alpha")
    points = wait_until(lambda: chart_points(browser), what="every chart to have data")
    drawn = browser.execute_script(DRAWN)
    assert all(drawn[c] > 0 for c in CHARTS), drawn
    assert browser.find_element(By.CSS_SELECTOR, "[data-f=progress]").text == "step 12/20 (60%)"
    assert "@ step 12" in browser.find_element(By.CSS_SELECTOR, "[data-f=summary]").text
    assert "val-core/agentrl/reward/mean@1" in browser.find_element(By.CSS_SELECTOR, "[data-f=eval_reward]").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#checkpoints tbody tr")) == 2
    assert "step:12" in browser.find_element(By.ID, "log").text
    shot(browser, "run-before")

    # the trainer writes two more steps while the page is open
    append_step(runs_root / "alpha", 13)
    append_step(runs_root / "alpha", 14)
    wait_until(lambda: browser.find_element(By.CSS_SELECTOR, "[data-f=progress]").text == "step 14/20 (70%)",
               what="the progress to move to step 14")
    after = wait_until(lambda: (p := chart_points(browser)) and p["loss"] > points["loss"] and p, what="new points")
    assert after["lr"] == points["lr"] + 2
    assert "step:14" in browser.find_element(By.ID, "log").text
    shot(browser, "run-after")

    # the step-range filter keeps only steps 3..6 in every chart
    browser.find_element(By.ID, "from").send_keys("3")
    browser.find_element(By.ID, "to").send_keys("6")
    wait_until(lambda: browser.execute_script(POINTS)["lr"] == 4, what="the range filter")
    xs = browser.execute_script("return document.querySelector('[data-chart=loss] .plot').data.flatMap(t => t.x)")
    assert xs and min(xs) >= 3 and max(xs) <= 6

    button = browser.find_element(By.CSS_SELECTOR, "#checkpoints tbody tr button")
    button.click()
    cmd = browser.find_element(By.CSS_SELECTOR, "#checkpoints tbody tr code.cmd")
    assert cmd.is_displayed() and cmd.text.startswith("agentrl export ") and "--step 5" in cmd.text
    polls = int(browser.find_element(By.TAG_NAME, "body").get_attribute("data-polls"))
    wait_until(lambda: int(browser.find_element(By.TAG_NAME, "body").get_attribute("data-polls")) > polls + 1,
               what="two more polls")
    assert cmd.is_displayed()  # a poll with no new checkpoint leaves the opened command alone


def test_explorer_pages_through_a_step(browser, live_server, runs_root):
    append_step(runs_root / "alpha", 13, prompts=12, samples=4)  # step 12's rollouts: 48, three pages of 20
    records = [json.loads(x) for x in (runs_root / "alpha" / "rollouts.jsonl").read_text().splitlines()]
    want = [r["rollout_id"] for r in records if r["step"] == 12 and not r["validation"]]
    browser.get(live_server.url + "runs/alpha/rollouts?step=12")
    seen = []
    for page in (1, 2, 3):
        assert browser.find_element(By.ID, "page-no").text == str(page)
        ids = [e.get_attribute("data-rollout") for e in browser.find_elements(By.CSS_SELECTOR, ".rollout")]
        assert ids and not set(ids) & set(seen)
        seen += ids
        if page == 1:
            shot(browser, "explorer")
            assert browser.find_elements(By.CSS_SELECTOR, ".call")  # tool calls with their arguments
        if page < 3:
            browser.find_element(By.ID, "next").click()
    assert seen == want and not browser.find_elements(By.ID, "next")
    # group view: one prompt's samples side by side, with advantages
    browser.find_element(By.CSS_SELECTOR, ".rollout .head a").click()
    cards = wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, ".group .rollout"), what="group view")
    assert len(cards) == 4 and all("advantage" in c.text for c in cards)
    shot(browser, "explorer-group")


def test_report_opens_offline_with_every_chart(browser, runs_root, tmp_path):
    out = write_report(runs_root / "alpha", tmp_path / "report.html")
    html = out.read_text()
    assert "<script src=" not in html and "<link rel=\"stylesheet\" href" not in html
    browser.get(out.as_uri())
    wait_until(lambda: chart_points(browser), what="the report's charts")
    assert browser.execute_script("return performance.getEntriesByType('resource').filter(e => !e.name.startsWith('file:')"
                                  " && !e.name.startsWith('data:')).map(e => e.name)") == []
    shot(browser, "report")
    pick = browser.find_element(By.ID, "step-pick")
    shown = browser.find_elements(By.CSS_SELECTOR, ".step-block:not([hidden]) .rollout")
    assert shown and pick.get_attribute("value") == "11"
    browser.find_element(By.ID, "f-uns").send_keys("only")
    visible = [e for e in browser.find_elements(By.CSS_SELECTOR, ".step-block:not([hidden]) .rollout") if e.is_displayed()]
    assert all("unscorable" in e.text for e in visible)


def test_validation_as_its_own_metric_lines(browser, live_server):
    browser.get(live_server.url + "runs/split")
    wait_until(lambda: chart_points(browser), what="every chart")
    names = browser.execute_script("return document.querySelector('[data-chart=validation] .plot').data.map(t => t.name)")
    assert "val/reward_mean" in names and not any(n.startswith("val-core") for n in names)
    xs = browser.execute_script("return document.querySelector('[data-chart=validation] .plot').data[0].x")
    assert xs == [5, 10]
    assert "@ step 10" in browser.find_element(By.CSS_SELECTOR, "[data-f=summary]").text
    assert "loss n/a" not in browser.find_element(By.CSS_SELECTOR, "[data-f=summary]").text
    assert "val/reward_mean, step 10" in browser.find_element(By.CSS_SELECTOR, "[data-f=eval_reward]").text
    steps = browser.execute_script("return document.querySelector('[data-chart=step_time] .plot').data[0].x")
    assert steps == list(range(1, 11))  # training lines only
    shot(browser, "split")


@pytest.fixture
def real_run(tmp_path):
    """A recorded slice of a real 6-step CPU demo run (see tests/ui/recorded/README.md)."""
    import shutil
    from pathlib import Path

    src = Path(__file__).parent / "recorded" / "real_run"
    dst = tmp_path / "runs" / "real"
    shutil.copytree(src, dst)
    return dst


def test_a_real_run_directory(browser, real_run, monkeypatch, tmp_path):
    from .conftest import LiveServer

    monkeypatch.setenv("AGENTRL_HOME", str(tmp_path / "home"))
    server = LiveServer(real_run.parent)
    try:
        browser.get(server.url + "runs/real")
        wait_until(lambda: chart_points(browser), what="every chart of the real run")
        assert "finished" in browser.find_element(By.CSS_SELECTOR, "[data-f=status]").text
        shot(browser, "real-run")
        browser.get(server.url + "runs/real/rollouts?step=2")
        assert browser.find_elements(By.CSS_SELECTOR, ".rollout")
        shot(browser, "real-explorer")
    finally:
        server.stop()


def test_staleness_chart_for_an_off_policy_run(browser, live_server, runs_root):
    """An off-policy run's metrics lines carry the staleness of the rollouts each step trained on: the
    page charts mean, max and the rollouts per value; an on-policy run's chart says why it is empty."""
    path = runs_root / "done" / "metrics.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for m in lines:
        if not m.get("validation"):
            late = 0 if m["step"] == 1 else 8
            m.update(staleness_mean=late / 16, staleness_max=1 if late else 0,
                     **{"staleness/0": 16 - late, **({"staleness/1": late} if late else {})})
    path.write_text("".join(json.dumps(m) + "\n" for m in lines))
    browser.get(live_server.url + "runs/done")
    wait_until(lambda: chart_points(browser), what="every chart")
    traces = browser.execute_script(
        "return document.querySelector('[data-chart=staleness] .plot').data.map(t => [t.name, t.x, t.y])")
    by_name = {name: (x, y) for name, x, y in traces}
    assert by_name["mean"] == ([1, 2, 3, 4, 5, 6], [0, 0.5, 0.5, 0.5, 0.5, 0.5])
    assert by_name["1 behind"][1] == [0, 8, 8, 8, 8, 8] and by_name["0 behind"][1] == [16, 8, 8, 8, 8, 8]
    shot(browser, "staleness")
    browser.get(live_server.url + "runs/alpha")
    wait_until(lambda: chart_points(browser), what="every chart of the on-policy run")
    empty = browser.find_element(By.CSS_SELECTOR, "[data-chart=staleness] .empty").text
    assert "on-policy run" in empty and "max_off_policy_steps" in empty


def test_run_page_warns_when_steps_taught_nothing(browser, live_server, runs_root):
    """Steps the Watcher flagged (every group's rewards equal, or grad norm 0) make a warning on the page."""
    from agentrl.stepwarnings import no_signal

    browser.get(live_server.url + "runs/done")
    wait_until(lambda: chart_points(browser), what="every chart to have data")
    assert browser.find_element(By.CSS_SELECTOR, "[data-f=signal]").text == ""  # a run that learns: no warning
    for step in (13, 14):
        append_step(runs_root / "alpha", step)
        with (runs_root / "alpha" / "metrics.jsonl").open("r+") as fh:  # the step as the Watcher writes it then
            lines = fh.read().splitlines()
            last = json.loads(lines[-1])
            last.update({"frac_reward_zero_std": 1.0, "grad_norm": 0.0})
            last["warning"] = no_signal(last)
            fh.seek(0)
            fh.truncate()
            fh.write("\n".join(lines[:-1] + [json.dumps(last)]) + "\n")
    browser.get(live_server.url + "runs/alpha")
    text = wait_until(lambda: browser.find_element(By.CSS_SELECTOR, "[data-f=signal]").text, what="the warning")
    assert text.startswith("warning: 2 of 14 steps had no learning signal (last: step 14, the latest step)"), text
    assert "every GRPO advantage is 0" in text
    shot(browser, "run-no-signal")
