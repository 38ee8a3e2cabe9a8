"""Model resolution, config loading, placeholders and backoff: pure, no X."""

from __future__ import annotations

import asyncio

import pytest

from desktop.actions import to_placeholders
from desktop.frame import Frame
from vision.config import VisionConfig, create_provider
from vision.errors import InvalidRequest, ModelUnavailable
from vision.models import ActRequest
from vision.providers.base import Observation
from vision.run.events import EventBus
from vision.run.loop import backoff_s, fill_placeholders


@pytest.fixture
def no_keys(monkeypatch):
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GLASSDESK_CONFIG"):
        monkeypatch.delenv(var, raising=False)


def test_default_model_follows_the_api_keys(no_keys, monkeypatch):
    config = VisionConfig()
    assert config.resolve(None) == "ocr"
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    assert config.resolve(None).startswith("gemini/")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert config.resolve(None).startswith("openai/")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert config.resolve(None).startswith("anthropic/")


def test_aliases_and_default_from_the_config_file(no_keys, tmp_path):
    file = tmp_path / "glassdesk.toml"
    file.write_text('default_model = "claude"\n[aliases]\nclaude = "anthropic/claude-sonnet-4-5-20250929"\n'
                    '[models."chat/qwen"]\nbase_url = "http://127.0.0.1:9/v1"\n')
    config = VisionConfig.load(file)
    assert config.resolve(None) == "anthropic/claude-sonnet-4-5-20250929"
    assert config.models["chat/qwen"]["base_url"].endswith("/v1")


def test_config_file_refuses_api_keys(tmp_path):
    file = tmp_path / "glassdesk.toml"
    file.write_text('[models."openai/x"]\napi_key = "sk-123"\n')
    with pytest.raises(SystemExit, match="environment"):
        VisionConfig.load(file)


@pytest.mark.parametrize("name", ["gpt-4o", "anthropic", "bogus/model"])
def test_unknown_or_incomplete_model_names_are_refused(no_keys, name):
    with pytest.raises(ModelUnavailable):
        VisionConfig().resolve(name)


def test_missing_api_key_is_reported_not_sent(no_keys):
    with pytest.raises(Exception, match="ANTHROPIC_API_KEY"):
        create_provider("anthropic/claude-sonnet-4-5", "do it", VisionConfig())


def test_scripted_provider_validates_its_script_up_front():
    with pytest.raises(InvalidRequest, match=r"script\[1\]: x"):
        create_provider("scripted", "x", VisionConfig(),
                        script=[{"action": "wait"}, {"action": "click", "x": 5000, "y": 1}])
    with pytest.raises(InvalidRequest, match="non-empty"):
        create_provider("scripted", "x", VisionConfig(), script=[])


def test_scripted_provider_replays_then_finishes():
    provider = create_provider("scripted", "x", VisionConfig(), script=[{"action": "move", "x": 3, "y": 4}])
    obs = Observation(frame=Frame(bytes(1920 * 1080 * 4), 1920, 1080))
    first = provider.turn(obs, [])
    assert [a.action for c in first.calls for a in c.actions] == ["move"] and not first.done
    assert provider.turn(obs, []).done


def test_placeholders_are_filled_and_unknown_ones_refused():
    assert fill_placeholders("user {{ name }} pw {{pw}}", {"name": "ann", "pw": "x$1"}) == "user ann pw x$1"
    assert fill_placeholders("no placeholders", {}) == "no placeholders"
    # The inverse, for text a person typed: each value by its name, a longer secret containing a
    # shorter one named whole; an empty secret names nothing; the round trip gives the text back.
    secrets = {"pw": "hunter2", "pin": "42", "longer": "hunter2-42", "empty": ""}
    assert to_placeholders("a hunter2-42 b hunter2 c 42", secrets) == "a {{longer}} b {{pw}} c {{pin}}"
    assert fill_placeholders(to_placeholders("x hunter2 y", secrets), secrets) == "x hunter2 y"
    assert to_placeholders("nothing", secrets) == "nothing"
    with pytest.raises(InvalidRequest, match="pw"):
        fill_placeholders("{{pw}}", {"other": "v"})


def test_backoff_honours_retry_after_and_grows_otherwise():
    assert backoff_s(1, 2.5) == 2.5
    assert backoff_s(1, 10_000) == 60.0
    assert backoff_s(1, None) < backoff_s(3, None) <= 8.0 * 1.2


def test_act_request_limits():
    assert ActRequest(instruction="x").max_steps == 10
    with pytest.raises(ValueError):
        ActRequest(instruction="x", max_steps=51)
    with pytest.raises(ValueError):
        ActRequest(instruction="")


def test_event_bus_delivers_across_threads_and_replays_recent():
    bus = EventBus(keep=3)

    async def main():
        queue = bus.subscribe()
        import threading
        threading.Thread(target=lambda: bus.publish("step", n=1)).start()
        event = await asyncio.wait_for(queue.get(), 5)
        bus.unsubscribe(queue)
        return event

    event = asyncio.run(main())
    assert event["kind"] == "step" and event["n"] == 1
    for i in range(5):
        bus.publish("x", i=i)
    assert [e["i"] for e in bus.recent()] == [2, 3, 4]
    assert [e["i"] for e in bus.recent(after_seq=bus.recent()[-2]["seq"])] == [4]


@pytest.mark.parametrize("option", ['"api-key" = "sk-1"', 'x_api_key = "sk-1"',
                                    'default_headers = {Authorization = "Bearer sk-1"}',
                                    '[models."openai/x".extra]\ntoken = "sk-1"'])
def test_config_file_refuses_credentials_however_spelled(tmp_path, option):
    file = tmp_path / "glassdesk.toml"
    table = '[models."openai/x"]\n'
    file.write_text(option if option.startswith("[") else table + option + "\n")
    with pytest.raises(SystemExit, match="never in the config file"):
        VisionConfig.load(file)


def test_config_file_keeps_ordinary_options(tmp_path):
    file = tmp_path / "glassdesk.toml"
    file.write_text('[models."anthropic/x"]\nmax_tokens = 2048\n')
    assert VisionConfig.load(file).models["anthropic/x"]["max_tokens"] == 2048


def test_act_request_refuses_unknown_fields():
    with pytest.raises(ValueError, match="max_step"):
        ActRequest(instruction="x", max_step=3)


def test_a_persons_typing_keeps_a_whole_secret_by_name_and_redacts_any_piece_of_one():
    from vision.run.loop import typed_by_person
    from vision.trace.records import redact_pieces

    secrets = {"pw": "hunter2", "pin": "4711"}
    assert typed_by_person("user ann, pw hunter2", secrets) == "user ann, pw {{pw}}"
    # Typed with a pause or a corrected typo, a password arrives in pieces: each is redacted.
    assert typed_by_person("hunt", secrets) == "[REDACTED]"
    assert typed_by_person("er2 and more", secrets) == "[REDACTED] and more"
    assert typed_by_person("x 471 {{pw}} 711", secrets) == "x [REDACTED] {{pw}} [REDACTED]"
    # Two characters in common mean nothing; a run of pieces is one redaction, not several.
    assert typed_by_person("he is 47", secrets) == "he is 47"
    assert redact_pieces("hunter2hunter2", ["hunter2"]) == "[REDACTED]"
    assert redact_pieces("anything", []) == "anything" and redact_pieces("ab", ["ab"]) == "ab"
