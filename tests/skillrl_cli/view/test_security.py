"""The view's security rules on any text a request may carry: host names, origins, tokens."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillrl_cli.view.security import LOOPBACK_NAMES, ViewSecurity, host_name, security_for_bind

HOST = "127.0.0.1:8765"
"""The ``Host`` the requests below were sent to."""

HEADER_TEXT = st.one_of(
    st.text(max_size=60),
    st.tuples(
        st.sampled_from(["", "http://", "https://", "//", "http://user@", "null"]),
        st.sampled_from(["127.0.0.1", "localhost", "[::1]", "evil.example", "127.0.0.1.evil"]),
        st.sampled_from(["", ":8765", ":1", ":", ":x", "@evil.example", "/path", "]"]),
        st.text(max_size=10),
    ).map("".join),
)
"""Header values as a client or a hostile page may send them (near-misses included)."""


@settings(max_examples=300, deadline=None)
@given(header=HEADER_TEXT)
def test_only_a_loopback_name_with_an_optional_port_is_an_answered_host(header):
    expected = re.fullmatch(r"(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?", header.lower())
    assert ViewSecurity().host_ok(header) is (expected is not None)


@settings(max_examples=300, deadline=None)
@given(source=HEADER_TEXT)
def test_a_change_is_accepted_only_from_a_page_of_the_host_it_was_sent_to(source):
    accepted = ViewSecurity().origin_ok(source, None, HOST)
    scheme = "[hH][tT][tT][pP][sS]?"  # any case, and only ASCII letters (re.I would take ſ for s)
    rest = r"([/?#][^\s\x00-\x1f\x7f]*)?"  # a path, query or fragment without blanks or controls
    own = re.fullmatch(f"{scheme}://{re.escape(HOST)}{rest}", source.strip())
    assert accepted is (own is not None)
    assert ViewSecurity().origin_ok(None, source, HOST) is accepted  # a Referer when no Origin


def test_a_request_from_no_page_at_all_is_left_to_the_csrf_token():
    assert ViewSecurity().origin_ok(None, None, HOST)
    assert ViewSecurity().origin_ok("http://127.0.0.1:8765", "http://evil.example/", HOST)
    assert not ViewSecurity().origin_ok("http://evil.example", "http://127.0.0.1:8765/", HOST)


@settings(max_examples=200, deadline=None)
@given(supplied=st.one_of(st.none(), st.text(max_size=40), st.binary(max_size=8)))
def test_any_supplied_token_is_compared_without_raising_and_only_the_token_passes(supplied):
    security = ViewSecurity(access_token="s3cret-é")
    assert security.csrf_ok(supplied) is (supplied == security.csrf_token)
    assert security.access_ok(supplied) is (supplied == "s3cret-é")


@pytest.mark.parametrize(
    ("host", "token", "answered"),
    [("127.0.0.1", None, LOOPBACK_NAMES), ("::1", None, LOOPBACK_NAMES),
     ("127.0.0.2", None, LOOPBACK_NAMES | {"127.0.0.2"}),
     ("192.168.1.5", "t", LOOPBACK_NAMES | {"192.168.1.5"}),
     ("fe80::1", "t", LOOPBACK_NAMES | {"[fe80::1]"}), ("0.0.0.0", "t", None), ("::", "t", None)],
)  # fmt: skip
def test_the_view_answers_to_the_loopback_names_and_its_bound_host(host, token, answered):
    assert security_for_bind(host, token).allowed_hosts == answered
    assert host_name(host) == (f"[{host}]" if ":" in host else host)
