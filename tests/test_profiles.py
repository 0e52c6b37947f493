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
    with pytest.raises(ConfigError):
        shipped_profile("lenient")


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

    with pytest.raises(ConfigError):
        resolve_profile("strict", user)


def test_a_missing_profile_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        resolve_profile("nosuch", {"mine": {"layers": ["sandbox"]}})


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(["validator"], id="not a table"),
        pytest.param({}, id="no layers"),
        pytest.param({"layers": "validator,sandbox"}, id="layers not a list"),
        pytest.param({"layers": ["validator", 3]}, id="a layer name not a string"),
        pytest.param({"layers": ["sandbox"], "settings": []}, id="settings not a table"),
        pytest.param({"layers": ["sandbox"], "settings": {"sandbox": 1}}, id="layer settings not a table"),
        pytest.param({"layers": ["sandbox"], "description": 7}, id="description not a string"),
        pytest.param({"layers": ["sandbox"], "layer": ["x"]}, id="unknown key"),
    ],
)
def test_a_malformed_profile_document_is_a_config_error(data: object) -> None:
    with pytest.raises(ConfigError):
        profile_from_data("mine", data, origin="config file")


def test_a_profile_name_with_a_path_in_it_is_refused() -> None:
    with pytest.raises(ConfigError):
        profile_from_data("../strict", {"layers": ["sandbox"]}, origin="config file")
