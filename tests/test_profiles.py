"""Profiles as data: shipped TOML files, the user's own from the config file, and their shape."""

from __future__ import annotations

import pytest

from oct_mcp.config import PROFILE_NAMES
from oct_mcp.errors import ConfigError
from oct_mcp.profiles import Profile, profile_from_data, resolve_profile, shipped_profile


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_each_shipped_profile_loads_with_a_description_and_layers(name: str) -> None:
    profile = shipped_profile(name)

    assert profile.name == name
    assert profile.origin == "shipped"
    assert profile.description
    assert profile.layers


def test_a_name_that_is_not_shipped_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        shipped_profile("lenient")

    assert caught.value.rule == "unknown_profile"


def test_a_user_profile_from_the_config_file_is_found_by_name() -> None:
    user = {"mine": {"layers": ["validator", "sandbox"], "description": "just two"}}

    profile = resolve_profile("mine", user)

    assert profile == Profile(
        name="mine",
        layers=("validator", "sandbox"),
        settings={},
        description="just two",
        origin="config file",
    )


def test_a_user_profile_may_not_take_a_shipped_name() -> None:
    user = {"strict": {"layers": ["sandbox"]}}

    with pytest.raises(ConfigError) as caught:
        resolve_profile("strict", user)

    assert caught.value.rule == "profile_shadows_shipped"


def test_a_missing_profile_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_profile("nosuch", {"mine": {"layers": ["sandbox"]}})

    assert caught.value.rule == "unknown_profile"


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        pytest.param(["validator"], "profile_not_a_table", id="not a table"),
        pytest.param({}, "profile_layers", id="no layers"),
        pytest.param({"layers": "validator,sandbox"}, "profile_layers", id="layers not a list"),
        pytest.param({"layers": ["validator", 3]}, "profile_layers", id="a layer name not a string"),
        pytest.param({"layers": ["sandbox"], "settings": []}, "profile_settings", id="settings not a table"),
        pytest.param(
            {"layers": ["sandbox"], "settings": {"sandbox": 1}},
            "profile_settings",
            id="layer settings not a table",
        ),
        pytest.param(
            {"layers": ["sandbox"], "description": 7}, "profile_description", id="description not a string"
        ),
        pytest.param({"layers": ["sandbox"], "layer": ["x"]}, "profile_unknown_keys", id="unknown key"),
        pytest.param(
            {"layers": ["sandbox"], "guarantees": ["fast"]}, "profile_guarantees", id="unknown guarantee"
        ),
        pytest.param(
            {"layers": ["sandbox"], "guarantees": "no_network"},
            "profile_guarantees",
            id="guarantees not a list",
        ),
    ],
)
def test_a_malformed_profile_document_is_a_config_error_naming_the_rule(data: object, rule: str) -> None:
    with pytest.raises(ConfigError) as caught:
        profile_from_data("mine", data, origin="config file")

    assert caught.value.rule == rule


def test_a_profile_name_with_a_path_in_it_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        profile_from_data("../strict", {"layers": ["sandbox"]}, origin="config file")

    assert caught.value.rule == "profile_name"


def test_a_well_formed_profile_keeps_its_settings_and_guarantees() -> None:
    data = {
        "layers": ["sandbox"],
        "settings": {"sandbox": {}},
        "guarantees": ["no_network"],
        "description": "d",
    }

    profile = profile_from_data("mine", data, origin="config file")

    assert (profile.settings, profile.guarantees, profile.description) == (
        {"sandbox": {}},
        frozenset({"no_network"}),
        "d",
    )
