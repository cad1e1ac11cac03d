"""The web console as a person uses it, in a real headless Chromium (conftest.py)."""

import os

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

EXAMPLES = {"add", "add_float32", "add_bool", "matmul", "softmax", "upper", "length", "transpose"}


def listed(page):
    return {li.get_attribute("data-method") for li in page.find_all("#method-list li")}


def wait_listed(page, names):
    page.wait(lambda d: names <= listed(page), what=f"the methods {sorted(names)} listed")


def result_cells(page):
    return [td.text for td in page.find_all("#try-result table.result td")]


def call_from_form(page, *values):
    for i, value in enumerate(values):
        page.set_value(f"#input-{i}", value)
    finished = lambda: int(page.find("#try-time").get_attribute("data-finished") or 0)
    before = finished()
    page.find("#try-call").click()
    page.wait(lambda d: finished() > before, what="the call's answer")


def test_the_method_list_shows_every_example_and_searches_by_name(page):
    page.open()
    wait_listed(page, EXAMPLES)
    assert listed(page) == EXAMPLES
    card = page.find('#method-list li[data-method="matmul"]')
    assert "a: float32[?, ?]" in card.text and "float32" in card.text
    page.screenshot("methods")
    page.set_value("#search", "add_")
    page.wait(lambda d: listed(page) == {"add_float32", "add_bool"}, what="the search to filter")
    page.set_value("#search", "nothing-like-this")
    page.wait(lambda d: listed(page) == set(), what="an empty list")
    assert "No method matches" in page.text("#methods-status")


def test_a_browser_asking_for_the_root_is_sent_to_the_console(page):
    page.driver.get(page.base + "/")
    page.wait(lambda d: d.current_url.endswith("/ui"), what="the redirect to /ui")
    wait_listed(page, {"add"})


def test_a_method_page_shows_its_signature_digest_and_versions(page):
    page.open("#method/matmul")
    page.wait(lambda d: "sha256:" in page.text("#method-facts"), what="the method's facts")
    facts = page.text("#method-facts")
    assert "digest" in facts and "size" in facts and "bytes" in facts
    rows = [r.text for r in page.find_all("#method-signature tbody tr")]
    assert rows == ["input a float32 [?, ?]", "input b float32 [?, ?]", "output output float32 [?, ?]"]
    assert "Matrix product" in page.text("#method-doc")


def test_calling_add_from_the_form_shows_the_answer_time_and_the_same_call_to_copy(page):
    page.open("#method/add")
    page.visible("#input-1")
    call_from_form(page, "[1, 2]", "[10, 20]")
    assert page.text("#try-error") == ""
    assert result_cells(page) == ["11", "22"]
    assert page.text("#try-time").startswith("answered in")
    assert "output: int32 [2]" in page.text("#try-result")
    curl = page.text("#try-curl")
    assert "/v1/methods/add/call?version=1" in curl
    assert '"data":[1,2]' in curl and '"data":[10,20]' in curl
    python = page.text("#try-python")
    assert "client.add_blocking(np.array([1, 2], dtype=np.int32), np.array([10, 20], dtype=np.int32))" in python
    page.screenshot("try-it")


def test_the_prefilled_sample_values_call_as_they_are(page):
    page.open("#method/matmul")
    page.visible("#input-1")
    page.find("#try-call").click()
    page.wait(lambda d: len(result_cells(page)) == 4, what="a 2x2 answer")
    # [[1, 2], [3, 4]] × [[10, 20], [30, 40]]
    assert result_cells(page) == ["70", "100", "150", "220"]
    assert page.find_all("#try-result canvas.result-image"), "a 2-D answer is drawn as an image"
    page.screenshot("try-it-image")


def test_a_1d_answer_is_drawn_as_a_chart(page):
    page.open("#method/softmax")
    page.visible("#input-0")
    call_from_form(page, "[1, 2, 3, 4]")
    assert len(result_cells(page)) == 4
    assert page.find_all("#try-result .chart svg polyline")


def test_invalid_values_are_flagged_as_typed_and_the_servers_refusal_shows_its_code(page):
    page.allowed_errors.append("status of 400")
    page.open("#method/add")
    page.visible("#input-1")
    page.set_value("#input-0", "[1.5, 2]")
    hint = page.find("#input-0-hint")
    page.wait(lambda d: "not a whole number" in hint.text, what="the hint to flag 1.5")
    assert page.find("#input-0").get_attribute("aria-invalid") == "true"
    page.set_value("#input-0", "[1, 2")
    page.wait(lambda d: "not valid JSON" in hint.text, what="the hint to flag bad JSON")
    # Shapes the form cannot judge (this input takes any shape), refused by the method itself.
    call_from_form(page, "[1, 2]", "[1, 2, 3]")
    error = page.text("#try-error")
    assert error.startswith("INVALID_ARGUMENT"), error
    assert page.text("#try-time").startswith("failed after")
    assert result_cells(page) == []
    page.screenshot("try-it-error")


def test_uploading_adds_a_version_and_a_version_is_deleted_after_confirming(page):
    page.open("#upload")
    page.visible("#upload-file").send_keys(os.environ["WASMRPC_UPLOAD_WASM"])
    page.wait(lambda d: page.find("#upload-name").get_attribute("value"), what="a name from the file")
    page.set_value("#upload-name", "uploaded")
    page.find("#upload-submit").click()
    # The add example exports several methods: the console asks which.
    choice = page.visible("#upload-export")
    options = [o.get_attribute("value") for o in Select(choice).options]
    assert {"add", "add_float32", "add_bool"} <= set(options), options
    Select(choice).select_by_value("add_float32")
    page.screenshot("upload-choose-export")
    page.find("#upload-submit").click()
    page.wait(lambda d: "Registered uploaded version 1" in page.text("#upload-result"), what="the upload's answer")
    page.find("#upload-submit").click()
    page.wait(lambda d: "Registered uploaded version 2" in page.text("#upload-result"), what="the second version")
    page.screenshot("upload")

    page.find_all("#upload-result a")[0].click()
    page.wait(lambda d: "2 of 1, 2" in page.text("#method-facts"), what="version 2's page")
    assert [o.text for o in Select(page.find("#version-select")).options] == ["1", "2 (newest)"]
    page.find("#delete-version").click()
    alert = page.driver.switch_to.alert
    assert "Delete version 2 of uploaded" in alert.text
    alert.accept()
    page.wait(lambda d: "1 of 1" in page.text("#method-facts"), what="version 1 alone")
    page.open("#methods")
    wait_listed(page, {"uploaded"})
    page.open("#method/uploaded")
    page.wait(lambda d: "1 of 1" in page.text("#method-facts"), what="the method page")
    page.find("#delete-version").click()
    alert = page.driver.switch_to.alert
    assert "only version" in alert.text
    alert.accept()
    page.wait(lambda d: d.current_url.endswith("#methods") and "uploaded" not in listed(page), what="the method gone")


def test_the_activity_charts_show_the_calls_just_made(page):
    page.open("#method/length")
    page.visible("#input-0")
    for _ in range(3):
        call_from_form(page, '["a", "bc"]')
        assert result_cells(page) == ["1", "2"]
    # Through the page's own link: the samples taken since the page loaded stay.
    page.find('nav a[data-tab="activity"]').click()
    row = 'tr[data-method="length"]'
    page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, row), what="the length row")
    page.wait(
        lambda d: int(page.find('figure[data-chart="calls"]').get_attribute("data-total") or 0) >= 3,
        timeout=15,
        what="the calls chart to count the 3 calls",
    )
    # Read within a wait: the table is redrawn every 2 s, and a cell read mid-redraw is stale.
    cells = page.wait(lambda d: [td.text for td in d.find_elements(By.CSS_SELECTOR, f"{row} td")], what="the row's cells")
    assert cells[0] == "length" and int(cells[1]) >= 3 and cells[2] == "0", cells
    # The charts of one method: `length` alone counts the same 3 calls.
    Select(page.find("#activity-method")).select_by_value("length")
    page.wait(
        lambda d: "(length)" in page.find('figure[data-chart="calls"] h3').text
        and int(page.find('figure[data-chart="calls"]').get_attribute("data-total") or 0) == 3,
        what="the calls chart of length alone",
    )
    assert page.find_all('figure[data-chart="calls"] svg :is(polyline, circle)')
    page.screenshot("activity")


def test_a_server_running_alone_says_so_on_the_cluster_page(page):
    page.open("#cluster")
    page.wait(lambda d: "alone" in page.text("#cluster-status"), what="the cluster status")
    assert not page.find("#cluster-table").is_displayed()


def test_a_clustered_server_lists_its_workers_with_rank_and_address(page):
    cluster = os.environ.get("WASMRPC_CLUSTER_URL")
    if not cluster:
        pytest.skip("no nats-server: tests/e2e/console.rs starts a cluster when it has one")
    page.base = cluster
    page.open("#cluster")
    page.wait(lambda d: len(page.find_all("#cluster-table tbody tr")) == 2, timeout=15, what="two workers")
    rows = [[td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")] for tr in page.find_all("#cluster-table tbody tr")]
    assert [r[0] for r in rows] == ["w-zero", "w-one (this one)"], rows
    assert [r[1] for r in rows] == ["0", "1"] and all(r[2].startswith("127.0.0.1:") for r in rows), rows
    assert all(r[3] == "serving" for r in rows), rows
    assert "This one is w-one" in page.text("#cluster-status")
    page.screenshot("cluster")


def test_with_keys_the_console_asks_for_one_and_keeps_it_for_the_tab(keyed_page):
    page = keyed_page
    page.open()
    page.visible("#key-input")
    page.screenshot("key-prompt")
    page.set_value("#key-input", "wrpc_not_a_key")
    page.find("#key-form button").click()
    page.wait(lambda d: "not accepted" in page.text("#key-error"), what="the refusal of a wrong key")
    page.set_value("#key-input", os.environ["WASMRPC_TENANT_KEY"])
    page.find("#key-form button").click()
    wait_listed(page, {"tenant_add"})
    assert listed(page) == {"tenant_add"}
    stored = page.driver.execute_script("return sessionStorage.getItem('wasmrpc.key')")
    assert stored == os.environ["WASMRPC_TENANT_KEY"]
    assert page.driver.get_cookies() == []
    assert not page.find('nav a[data-tab="tenants"]').is_displayed()
    # A reload in the same tab keeps the key; the method answers with it.
    page.open("#method/tenant_add")
    page.driver.refresh()
    page.visible("#input-1")
    call_from_form(page, "[1, 2]", "[10, 20]")
    assert result_cells(page) == ["11", "22"]
    assert 'Authorization: Bearer $WASMRPC_KEY' in page.text("#try-curl")
    assert os.environ["WASMRPC_TENANT_KEY"] not in page.text("#try-curl") + page.text("#try-python")
    page.open("#activity")
    page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-method="team-a/tenant_add"]'), what="the tenant's own activity")


def test_the_admin_key_shows_the_tenants_with_their_quotas_and_usage(keyed_page):
    page = keyed_page
    page.allowed_errors.append("status of 403")
    page.open("#tenants")
    page.visible("#key-input")
    page.set_value("#key-input", os.environ["WASMRPC_ADMIN_KEY"])
    page.find("#key-form button").click()
    page.visible('nav a[data-tab="tenants"]')
    page.wait(lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-tenant="team-a"]'), what="team-a's row")
    cells = [td.text for td in page.find_all('tr[data-tenant="team-a"] td')]
    assert cells[0] == "team-a" and cells[1] == "1", cells
    page.screenshot("tenants")


def test_the_console_fits_a_phones_width(phone_page):
    page = phone_page
    page.open()
    wait_listed(page, EXAMPLES)
    overflow = page.driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"the page is {overflow}px wider than a phone's screen"
    page.screenshot("phone-methods")
    page.open("#method/add")
    page.visible("#input-1")
    overflow = page.driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"the method page is {overflow}px wider than a phone's screen"
    page.screenshot("phone-method")


def test_the_theme_follows_the_systems_dark_setting(page):
    page.driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    page.open()
    wait_listed(page, {"add"})
    dark = page.driver.execute_script("return getComputedStyle(document.body).backgroundColor")
    page.screenshot("methods-dark")
    page.driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]}
    )
    light = page.driver.execute_script("return getComputedStyle(document.body).backgroundColor")
    assert dark == "rgb(21, 23, 26)" and light == "rgb(251, 251, 250)", (dark, light)
