"""The provider registry and each provider's own checks (pure: no database, no server)."""

import pytest

from annotations.judge.providers import PROVIDERS, provider_get
from annotations.judge.providers.base import Call, RunConfig
from annotations.judge.providers.baseline_model import NAME
from annotations.models import JudgeRun, Rater

ALLOWED = {"OPENAI_API_KEY": ("https://api.openai.com/v1",)}


def test_every_run_provider_choice_has_a_registered_provider_and_no_more():
    assert set(PROVIDERS) == set(JudgeRun.Provider.values)
    for provider in PROVIDERS.values():
        assert provider.rater_kind in Rater.Kind.values


def test_an_unknown_provider_name_is_a_key_error():
    with pytest.raises(KeyError):
        provider_get("nope")


def test_openai_chat_names_each_wrong_field():
    openai = provider_get("openai")
    errors = openai.validate(RunConfig(base_url="ftp://x", model=" ", api_key_env="sk-123"), allowed_keys=ALLOWED)
    assert set(errors) == {"base_url", "model", "api_key_env"}
    good = RunConfig(base_url="https://api.openai.com/v1", model="m", api_key_env="OPENAI_API_KEY")
    assert openai.validate(good, allowed_keys=ALLOWED) == {}


def test_openai_chat_refuses_a_key_the_setting_does_not_list():
    config = RunConfig(base_url="https://api.openai.com/v1", model="m", api_key_env="SECRET_KEY")
    errors = provider_get("openai").validate(config, allowed_keys=ALLOWED)
    assert list(errors) == ["api_key_env"] and "OPENAI_API_KEY" in errors["api_key_env"]


def test_the_baseline_checks_its_training_source_only():
    baseline = provider_get("baseline")
    assert baseline.validate(RunConfig(baseline_source="rater:3"), allowed_keys={}) == {}
    assert list(baseline.validate(RunConfig(baseline_source="x"), allowed_keys={})) == ["baseline_source"]


def test_rater_names():
    assert provider_get("openai").rater_name(model="gpt", prompt_number=2) == "gpt · prompt v2"
    assert provider_get("baseline").rater_name(model=NAME, trained_on="agreed") == f"{NAME} · agreed"


def test_per_trace_providers_answer_calls_and_the_baseline_does_not():
    assert provider_get("openai").per_trace and not provider_get("baseline").per_trace
    call = Call(base_url="http://127.0.0.1:9/v1", api_key="k", model="m", temperature=0, max_tokens=1, timeout=1)
    with pytest.raises(NotImplementedError):
        provider_get("baseline").complete(call, [], json_mode=False)
