"""The operator console in headless Chromium: search, the message page, requeue with its confirmation and audit,
markup shown as text, and a POST without its CSRF token refused. Each test leaves a screenshot in tests/artifacts/."""

from __future__ import annotations

from typing import Any

from console.conftest import MARKUP, POISON, Console, drain, run
from hub_ops import show


def search(page: Any, console: Console, **fields: str) -> None:
    """Fill the search form and submit it (htmx swaps the results in)."""
    page.goto(console.url + "/")
    for name, value in fields.items():
        page.fill(f"input[name={name}]", value)
    with page.expect_response(lambda response: "?" in response.url):
        page.click("#search button[type=submit]")
    name, value = next(iter(fields.items()))
    page.wait_for_url(f"**{name}={value}*")  # htmx pushes the query to the address bar once it swapped the results


def test_search_finds_a_message_by_control_number_and_by_invoice_number(page: Any, console: Console) -> None:
    """The control number finds its row alone; the invoice number finds the message that created that invoice."""
    processed = console.traffic.processed
    search(page, console, control=processed.control)
    rows = page.locator("#results tbody tr")
    assert rows.count() == 1
    assert processed.control in rows.first.inner_text()
    assert "processed" in rows.first.inner_text()
    assert f"control={processed.control}" in page.url  # htmx pushed the query: the page can be bookmarked
    search(page, console, invoice=processed.number)
    assert page.locator("#results tbody tr").count() == 1
    assert processed.control in page.locator("#results tbody tr").first.inner_text()
    search(page, console, invoice="NO-SUCH-INVOICE")
    assert "No journal row matches" in page.locator("#results").inner_text()


def test_message_page_shows_segments_invoices_and_acknowledgments(page: Any, console: Console) -> None:
    """A conflicting message: its journal row, the invoice the first copy created, the acknowledgments sent for it
    (as `edinbox show` lists them), the conflicting copy's segments."""
    conflicted = console.traffic.conflicted
    search(page, console, control=conflicted.control)
    page.click(f"#results a:has-text('{conflicted.control}')")
    page.wait_for_load_state("networkidle")
    assert "conflict" in page.locator("dl.row").inner_text()
    invoices = page.locator("#invoices tbody tr")
    assert invoices.count() == 1
    assert conflicted.number in invoices.first.inner_text()
    shown = run(show(console.config, page.locator("dl.row code").first.inner_text()))
    assert shown is not None
    assert shown["acknowledgments"]
    acks = page.locator("#acknowledgments tbody tr")
    assert acks.count() == len(shown["acknowledgments"])
    for row, ack in zip(acks.all(), shown["acknowledgments"], strict=True):
        assert ack["kind"] in row.inner_text()
        assert ack["control_number"] in row.inner_text()
    segments = page.locator("#conflict-segments").inner_text().splitlines()
    assert segments[0].startswith("ISA")
    assert any(line.startswith("BIG") for line in segments)
    assert segments[-1].startswith("IEA")


def test_requeue_then_replay_of_a_dead_message_ends_in_one_invoice(page: Any, console: Console) -> None:
    """Requeue then replay from the console each ask for a confirmation, are audited, and end in one invoice."""
    dead = console.traffic.dead
    page.goto(console.url + "/parked/dead")
    row = page.locator("tr", has_text=dead.control)
    assert row.count() == 1
    payload = page.goto(console.url + f"/message?key={_key(console, dead.control)}")
    assert payload is not None
    assert page.locator("#segments").inner_text().startswith("ISA")  # a dead row keeps its payload
    page.click("a.button:has-text('Requeue')")
    assert "Requeue" in page.locator("h1").inner_text()  # the confirmation, nothing changed yet
    assert run(show(console.config, _key(console, dead.control)))["status"] == "dead"
    page.fill("input[name=operator]", "night-shift")
    page.click("#confirm")
    page.wait_for_load_state("networkidle")
    assert "requeue: done" in page.locator(".notice").inner_text()
    assert "requeued" in page.locator("dl.row").inner_text()
    page.click("a.button:has-text('Replay')")
    assert "Replay" in page.locator("h1").inner_text()
    page.click("#confirm")
    page.wait_for_load_state("networkidle")
    assert "replay: done" in page.locator(".notice").inner_text()
    run(drain(console.config))
    page.reload()
    assert page.locator("#invoices tbody tr").count() == 1
    assert dead.number in page.locator("#invoices").inner_text()
    assert "processed" in page.locator("dl.row").inner_text()
    page.goto(console.url + "/audit")
    audit = page.locator("#audit tbody").inner_text()  # newest first: the replay, then the requeue
    assert audit.index("replay") < audit.index("requeue")
    assert audit.count("night-shift") == 2
    assert dead.control in audit


def test_partner_markup_is_shown_as_text(page: Any, console: Console) -> None:
    """A partner id and an error message holding <script> are shown as text: no element made, no script run."""
    search(page, console, partner="script")
    cell = page.locator("#results tbody tr td").nth(1)
    assert cell.inner_text().startswith(f"{MARKUP.qualifier}:<script")
    assert cell.locator("*").count() == 0
    page.goto(console.url + "/parked/dead")
    error = page.locator("tr", has_text=console.traffic.stuck.control).locator("td.error")
    assert POISON in error.inner_text()
    assert error.locator("*").count() == 0
    page.goto(console.url + f"/message?key={_key(console, console.traffic.stuck.control)}")
    assert POISON in page.locator("dl.row").inner_text()
    assert page.evaluate("typeof window.pwned") == "undefined"


def test_a_post_without_the_csrf_token_is_refused(page: Any, console: Console) -> None:
    """A forget POSTed without the form's CSRF token (or with a wrong one) is refused and changes nothing."""
    processed = console.traffic.processed
    key = _key(console, processed.control)
    page.goto(console.url + "/")
    script = """async ([key, csrf]) => {
        const body = new URLSearchParams({action: "forget", key: key, operator: "intruder"});
        if (csrf) body.set("csrf", csrf);
        const response = await fetch("/action", {method: "POST", body: body});
        return [response.status, await response.text()];
    }"""
    status, text = page.evaluate(script, [key, ""])
    assert status == 403
    assert "CSRF" in text
    status, _ = page.evaluate(script, [key, "not-the-token"])
    assert status == 403
    assert run(show(console.config, key)) is not None


def test_dashboard_draws_its_charts(page: Any, console: Console) -> None:
    """The dashboard's SVG has a bar per status and minute, and the top partners include the markup partner."""
    page.goto(console.url + "/dashboard")
    assert page.locator("#per-minute rect").count() >= 1
    partners = page.locator("#partners").text_content()
    assert f"{MARKUP.qualifier}:<script" in partners
    assert page.locator("#partners script").count() == 0


def _key(console: Console, control: str) -> str:
    """The journal key of one of the console's messages, by control number (as the search finds it)."""
    return f"X12:ZZ:{console.traffic.processed.partner.id}>ZZ:EDINBOXHUB/{control}"


def test_a_rejected_payload_is_shown_replayed_and_forgotten(page: Any, console: Console) -> None:
    """A rejected payload has its own page (reason, size, the payload itself); replay puts it back through the hub
    (its deliveries grow), forget deletes it; requeue is not offered; both actions are audited."""
    page.goto(console.url + "/parked/rejected")
    row = page.locator("tr", has_text="rejected/")
    assert row.count() == 1
    assert [b.inner_text() for b in row.locator("a.button").all()] == ["Replay…", "Forget…"]
    row.locator("a", has_text="rejected/").click()
    page.wait_for_load_state("networkidle")
    key = page.locator("dl.row code").inner_text()
    assert page.locator("#payload").inner_text() == console.traffic.garbage.decode()
    before = run(show(console.config, key))
    assert before is not None
    assert before["reason"] in page.locator("dl.row").inner_text()
    assert page.locator("a.button:has-text('Requeue')").count() == 0
    page.click("a.button:has-text('Replay')")
    page.fill("input[name=operator]", "day-shift")
    page.click("#confirm")
    page.wait_for_load_state("networkidle")
    assert "replay: done" in page.locator(".notice").inner_text()
    run(drain(console.config))
    after = run(show(console.config, key))
    assert after is not None
    assert after["deliveries"] == before["deliveries"] + 1  # the hub met it again and parked it on the same row
    page.click("a.button:has-text('Forget')")
    assert "parked payload is deleted" in page.locator("main").inner_text()
    page.click("#confirm")
    assert run(show(console.config, key)) is None
    page.goto(console.url + "/parked/rejected")
    assert page.locator("tr", has_text="rejected/").count() == 0
    page.goto(console.url + "/audit")
    audit = page.locator("#audit tbody").inner_text()
    assert audit.count(key) == 2
