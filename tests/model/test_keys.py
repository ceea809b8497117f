from __future__ import annotations

import pytest

from graph_api.errors import BadUserInput
from graph_api.model import keys
from graph_api.model.keys import Kind

# -- normalize_place -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("United States", "united_states"),
        ("  united   STATES ", "united_states"),
        ("New\tYork\n", "new_york"),
        ("STRASSE", "strasse"),
        ("Straße", "strasse"),
        ("Rio-de.Janeiro", "rio-de.janeiro"),
    ],
)
def test_normalize_place_trims_casefolds_and_joins_blanks(raw: str, normalized: str) -> None:
    assert keys.normalize_place(raw) == normalized


def test_normalize_place_escapes_the_separator_and_the_escape_character() -> None:
    assert keys.normalize_place("a#CITY#b") == "a%23city%23b"
    assert keys.SEP not in keys.normalize_place("a#CITY#b")
    assert keys.normalize_place("100%") == "100%25"
    assert keys.normalize_place("%23") != keys.normalize_place("#")


def test_normalize_place_keeps_non_ascii_apart_from_ascii() -> None:
    assert keys.normalize_place("Québec") == keys.normalize_place("QUÉBEC")
    assert keys.normalize_place("Québec") != keys.normalize_place("Quebec")
    assert keys.SEP not in keys.normalize_place("São Paulo")


def test_place_with_separator_cannot_forge_a_deeper_level() -> None:
    forged = keys.home_location("stu-1", "Canada", "Ontario#CITY#Toronto", "Elsewhere")
    assert forged.sk.count(keys.SEP) == keys.home_location("stu-1", "C", "O", "T").sk.count(
        keys.SEP
    )
    toronto = keys.location("Canada", "Ontario", "Toronto")
    assert not forged.sk.startswith(toronto.prefix)
    assert not forged.sk.startswith(keys.location("Canada", "Ontario").prefix)


# -- location ranges -------------------------------------------------------------------------


def test_location_prefixes_end_with_the_separator() -> None:
    assert keys.location("US", "CA").prefix.endswith(keys.SEP)
    assert keys.location("US", "CA", "LA").prefix.endswith(keys.SEP)
    assert keys.location("US").prefix == ""


def test_state_prefix_does_not_match_a_longer_state() -> None:
    california = keys.home_location("stu-1", "United States", "California", "Los Angeles")
    assert not california.sk.startswith(keys.location("United States", "CA").prefix)
    assert not california.sk.startswith(keys.location("United States", "Cal").prefix)
    assert california.sk.startswith(keys.location("United States", " california ").prefix)


def test_city_prefix_does_not_match_a_longer_city() -> None:
    home = keys.home_location("stu-1", "United States", "New York", "New York City")
    assert not home.sk.startswith(keys.location("United States", "New York", "New York").prefix)
    assert home.sk.startswith(keys.location("united states", "NEW YORK", "new york city").prefix)


def test_location_partition_is_the_normalized_countrys_shard_of_the_state() -> None:
    home = keys.home_location("stu-1", "United States", "Texas", "Austin")
    assert keys.location("  UNITED states").pk == "COUNTRY#united_states"  # the list's name
    assert home.pk == keys.location_shard("united states", " TEXAS")
    assert home.pk.rsplit(keys.SEP, 1)[0] == keys.location("United States").pk
    country = keys.location_ranges("  UNITED states")
    assert [r.pk for r in country] == [f"COUNTRY#united_states#{n}" for n in range(4)]
    assert [r.pk for r in keys.location_ranges("United States", "texas", "X")] == [home.pk]
    assert home.pk not in {r.pk for r in keys.location_ranges("United")}
    assert keys.location_ranges("US", unsharded=True)[-1].pk == keys.location("US").pk
    assert keys.location("United States").index == keys.GSI1


def test_location_city_without_state_is_bad_user_input() -> None:
    with pytest.raises(BadUserInput) as raised:
        keys.location("Canada", None, "Toronto")
    assert raised.value.extensions == {"field": "state"}


# -- ids read back from keys (what a valid id is: tests/model/test_ids.py) ------------------------


@pytest.mark.parametrize("kind", list(Kind))
def test_id_of_and_kind_of_round_trip_a_node_key(kind: Kind) -> None:
    node = keys.node(kind, "x-1_y")
    assert node.pk == node.sk
    assert keys.id_of(node.pk) == "x-1_y"
    assert keys.kind_of(node.pk) == kind.value


def test_id_of_reads_both_ends_of_an_edge_and_a_home_location() -> None:
    key, inverse = keys.edge(Kind.STUDENT, "stu-1", Kind.CLASS, "cls-2")
    # The edge sits in the class's partition (its roster), inverted under the student.
    assert (keys.id_of(key.pk), keys.id_of(key.sk)) == ("cls-2", "stu-1")
    assert key.pk == keys.roster(Kind.CLASS, "cls-2", Kind.STUDENT).pk
    assert (inverse.pk, inverse.sk) == (key.sk, key.pk)
    assert keys.id_of(keys.home_location("stu-9", "A", "B", "C").sk) == "stu-9"


def test_range_labels_differ_between_ranges() -> None:
    labels = {
        keys.catalog(Kind.TEACHER).label,
        keys.catalog(Kind.CLASS).label,
        keys.roster(Kind.CLASS, "a", Kind.STUDENT).label,
        keys.roster(Kind.CLASS, "b", Kind.STUDENT).label,
        keys.location("Canada").label,
        keys.location("Canada", "Ontario").label,
        keys.entries(Kind.STUDENT, "a", Kind.CLASS).label,
    }
    assert len(labels) == 7
