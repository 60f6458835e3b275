from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import envs
from envs.base import TextEnv
from skillrl_core.errors import UnknownEnvError


def test_make_webshop_returns_a_text_env():
    env = envs.make("webshop")
    assert isinstance(env, TextEnv)
    assert env.env_id == "webshop"
    assert "webshop" in envs.registered()


def test_unknown_env_id_suggests_the_closest_registered_id():
    with pytest.raises(UnknownEnvError) as caught:
        envs.make("webshp")
    message = str(caught.value)
    assert "'webshp'" in message
    assert "did you mean 'webshop'" in message


def test_bad_config_field_is_a_clear_error():
    with pytest.raises(ValueError, match="observation_mode"):
        envs.make("webshop", observation_mode="html")
    with pytest.raises(ValueError, match="max_turns"):
        envs.make("webshop", max_turns=0)


# -- environments from outside: module:ATTRIBUTE references and entry points ------------------


def test_a_module_reference_resolves_to_the_spec_and_its_adapter():
    # toy_env (tests/envs, on pytest's path) holds docs/environments.md's SPEC.
    spec = envs.spec_of("toy_env:SPEC")
    assert spec.env_id == "toy_env:SPEC"  # the reference is the id every record keeps
    assert spec.description.startswith("Counter:")
    adapter = envs.adapter_for("toy_env:SPEC")
    assert adapter.split_size("test", {}) == 5 and adapter.categories({}) == ["counting"]
    env = envs.make("toy_env:SPEC", max_turns=3)
    obs, _info = env.reset(options={"goal_index": 1})
    assert obs == "Counter: 0. Target: 2."
    assert envs.registry.skillrl_categories("toy_env:SPEC") == {}


def test_a_resolved_reference_is_listed_with_where_it_came_from():
    envs.registry.check_id("toy_env:SPEC")
    sources = {e.spec.env_id: e.source for e in envs.registry.listing()}
    assert sources["toy_env:SPEC"] == "toy_env:SPEC"
    assert sources["webshop"] == "built-in (envs.webshop.spec)"


@pytest.mark.parametrize(
    ("env_id", "expected"),
    [
        ("no_such_package_xyz.envs:SPEC", "importing 'no_such_package_xyz.envs:SPEC' failed"),
        ("toy_env:NO_SUCH_SPEC", "AttributeError"),
        ("toy_env:CounterEnv", "is a type, not an envs.EnvSpec"),
        ("toy env:SPEC", "a reference is package.module:ATTRIBUTE"),
    ],
)
def test_a_reference_that_cannot_be_resolved_is_one_line_naming_the_id(env_id, expected):
    with pytest.raises(UnknownEnvError) as caught:
        envs.spec_of(env_id)
    message = str(caught.value)
    assert repr(env_id) in message and expected in message and "\n" not in message
    assert env_id not in envs.registered()  # nothing half-registered


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40).filter(lambda text: not envs.registry._is_reference(text)))
def test_any_other_text_is_an_unknown_environment_naming_it(text):
    if text in envs.registered():
        return
    with pytest.raises(UnknownEnvError) as caught:
        envs.spec_of(text)
    assert repr(text) in str(caught.value)


def _install_entry_point(root: Path, line: str) -> None:
    """Write a package's metadata declaring ``line`` in the skillrl.envs group under ``root``."""
    info = root / "counter_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: counter-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[skillrl.envs]\n{line}\n")


def test_an_installed_entry_point_is_an_id_listed_with_its_package(tmp_path, monkeypatch):
    _install_entry_point(tmp_path, "counter = toy_env:SPEC")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert envs.spec_of("counter").env_id == "counter"
    sources = {e.spec.env_id: e.source for e in envs.registry.listing()}
    assert sources["counter"] == "entry point skillrl.envs in counter-plugin (toy_env:SPEC)"
    with pytest.raises(UnknownEnvError, match="did you mean 'counter'"):
        envs.spec_of("countr")


def test_a_broken_entry_point_fails_naming_its_id(tmp_path, monkeypatch):
    _install_entry_point(tmp_path, "broken = no_such_package_xyz:SPEC")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert envs.spec_of("webshop").env_id == "webshop"  # other ids do not import it
    with pytest.raises(UnknownEnvError, match=r"environment 'broken': importing 'no_such_pac"):
        envs.registry.listing()
