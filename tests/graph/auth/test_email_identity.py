"""What counts as the same email address: trimmed, Unicode NFC, then case-folded. Two
students cannot share one, however each was typed (README, "Writes")."""

from __future__ import annotations

import unicodedata

import pytest
from support import Result, assert_clean, create_student, of_type, ok, run, scan

from graph_api.graph.engine.context import Services
from graph_api.model import keys

COMPOSED = "jos\u00e9@example.org"  # é as one code point
DECOMPOSED = "jose\u0301@example.org"  # e, then a combining acute accent
CREATE = """mutation($i: CreateStudentInput!) {
  createStudent(input: $i) { student { id email } userErrors { code field } } }"""
UPDATE = """mutation($id: ID!, $e: String) { updateStudent(id: $id, input: {email: $e}) {
  student { email } userErrors { code field } } }"""


def refusal_codes(result: Result) -> list[str]:
    """The codes of what refused the write: user errors, or GraphQL errors."""
    return [e["code"] for e in result.user_errors] + result.codes


def test_the_uniqueness_key_is_nfc_then_case_folded() -> None:
    assert COMPOSED != DECOMPOSED
    same = {COMPOSED, DECOMPOSED, " JOSE\u0301@EXAMPLE.ORG ", "Jos\u00c9@Example.org"}
    assert {keys.normalize_email(e) for e in same} == {COMPOSED}
    assert keys.email_guard(DECOMPOSED) == keys.email_guard(COMPOSED)


@pytest.mark.parametrize(
    ("first", "second"),
    [(COMPOSED, DECOMPOSED), (DECOMPOSED, COMPOSED), (COMPOSED, "JOSE\u0301@EXAMPLE.ORG")],
    ids=["composed then decomposed", "decomposed then composed", "then upper case decomposed"],
)
def test_one_address_typed_two_ways_belongs_to_one_student(
    svc: Services, first: str, second: str
) -> None:
    create_student(svc, "José", first, id="s1")
    result = run(svc, CREATE, {"i": {"id": "s2", "name": "Other", "email": second}})
    assert refusal_codes(result) == ["ALREADY_EXISTS"]
    assert result.user_errors[0]["field"] == "email"
    assert [s["id"] for s in of_type(scan(svc), "student")] == ["s1"]
    assert len(of_type(scan(svc), "email")) == 1
    assert_clean(svc)


def test_an_email_is_stored_in_nfc(svc: Services) -> None:
    created = create_student(svc, "José", f"  {DECOMPOSED} ", id="s1")
    assert created["email"] == COMPOSED
    assert unicodedata.is_normalized("NFC", created["email"])
    [item] = of_type(scan(svc), "student")
    assert item["email"] == COMPOSED
    assert_clean(svc)


def test_changing_to_the_same_address_typed_otherwise_keeps_it(svc: Services) -> None:
    create_student(svc, "José", COMPOSED, id="s1")
    data = ok(svc, UPDATE, {"id": "s1", "e": DECOMPOSED})
    assert data["updateStudent"]["student"]["email"] == COMPOSED
    assert len(of_type(scan(svc), "email")) == 1
    assert_clean(svc)


def test_changing_to_another_students_address_typed_otherwise_is_refused(svc: Services) -> None:
    create_student(svc, "José", COMPOSED, id="s1")
    create_student(svc, "Ana", "ana@example.org", id="s2")
    result = run(svc, UPDATE, {"id": "s2", "e": DECOMPOSED})
    assert refusal_codes(result) == ["ALREADY_EXISTS"]
    emails = {s["id"]: s["email"] for s in of_type(scan(svc), "student")}
    assert emails == {"s1": COMPOSED, "s2": "ana@example.org"}
    assert_clean(svc)
