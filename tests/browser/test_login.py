from tests.browser.conftest import PASSWORD, screenshot


def test_it_sends_a_visitor_to_the_login_page(page):
    page.goto("/")
    assert "/accounts/login/" in page.url
    assert page.get_by_role("heading", name="Log in to contextops").is_visible()


def test_it_refuses_a_wrong_password(page, person):
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(person.username)
    page.get_by_label("Password").fill("wrong" + PASSWORD)
    page.get_by_role("button", name="Log in").click()
    assert (
        page.get_by_role("alert").inner_text().startswith("Your username and password didn't match")
    )


def test_it_logs_a_person_in_and_out(logged_in):
    page = logged_in
    assert page.get_by_role("link", name="Sessions").is_visible()
    screenshot(page, "login-landing")
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url("**/accounts/login/")


def test_it_serves_pages_that_satisfy_their_content_security_policy(logged_in):
    page = logged_in
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    page.goto("/")
    page.wait_for_load_state("networkidle")
    # htmx is served by the project itself and loaded without breaking the policy.
    assert page.evaluate("typeof window.htmx") == "object"
    assert violations == []


def test_the_admin_finds_an_icon_where_browsers_look_for_one(logged_in):
    """Django's admin names no icon, so the browser asks for /favicon.ico: it gets the
    dashboard's own icon, not a 404 logged as a console error (the fixture fails on one)."""
    page = logged_in
    page.goto("/admin/")
    page.wait_for_load_state("networkidle")
    assert page.get_by_role("heading", name="Site administration").is_visible()
    icon = page.request.get("/favicon.ico")
    assert icon.ok and icon.url.endswith(".svg"), icon.url
