from __future__ import annotations

import pytest

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
