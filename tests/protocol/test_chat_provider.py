"""ChatProvider through the real openai SDK against a local fake chat-completions server."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from desktop.actions import Click, Key, Type
from desktop.frame import Frame
from tests.fakes.server import FakeServer, Reply, Request
from vision.actions import CallResult, Done
from vision.providers.base import ModelCallError, Observation
from vision.providers.chat import ChatProvider

INSTRUCTION = "Open the settings page."
SYSTEM = "You operate a Linux desktop."


def frame(color: tuple[int, int, int] = (30, 60, 90)) -> Frame:
    bgra = Image.new("RGB", (1920, 1080), color).convert("RGBA").tobytes("raw", "BGRA")
    return Frame(bgra, 1920, 1080)


OBSERVATION = Observation(frame(), url="http://example.test/")


@pytest.fixture(scope="module")
def _server():
    # One server for the module, not the tier's one per test (tests/protocol/conftest.py): stopping
    # one takes 0.5 s (serve_forever's poll interval).
    with FakeServer() as server:
        yield server


@pytest.fixture
def fake(_server):
    _server.requests.clear()  # each test queues exactly the replies it consumes
    return _server


def provider(fake: FakeServer, model: str = "gpt-4o-mini", **kwargs) -> ChatProvider:
    return ChatProvider(INSTRUCTION, model=model, system=SYSTEM, base_url=fake.url + "/v1", timeout=10, **kwargs)


def completion(content: str, *, prompt_tokens: int = 1500, completion_tokens: int = 40,
               finish_reason: str = "stop", cached: int | None = None) -> dict:
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish_reason}],
            "usage": usage}


def images(request: Request) -> list[Image.Image]:
    """Every screenshot in the request, decoded; each must be a base64 PNG data URL."""
    out = []
    for message in request.body["messages"]:
        if isinstance(message["content"], list):
            for part in message["content"]:
                if part["type"] == "image_url":
                    url = part["image_url"]["url"]
                    assert url.startswith("data:image/png;base64,")
                    assert part["image_url"]["detail"] == "auto"
                    png = base64.b64decode(url.split(",", 1)[1])
                    assert png.startswith(b"\x89PNG\r\n\x1a\n")
                    out.append(Image.open(io.BytesIO(png)))
    return out


def texts(message: dict) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "\n".join(p["text"] for p in content if p["type"] == "text")


def checked(content: str, *, model: str, size: tuple[int, int], prompt_mentions: str, **kwargs):
    """A responder that checks the request's shape before answering with ``content``."""
    def respond(request: Request) -> Reply:
        assert (request.method, request.path) == ("POST", "/v1/chat/completions")
        body = request.body
        assert body["model"] == model
        system = body["messages"][0]
        assert system["role"] == "system"
        assert system["content"].startswith(SYSTEM)
        assert prompt_mentions in system["content"]
        last = body["messages"][-1]
        assert last["role"] == "user"
        image = images(request)[-1]
        assert image.size == size
        return Reply(200, completion(content, **kwargs))
    return respond


# --- request shape and actions per dialect --------------------------------------------------------


def test_json_dialect_first_turn(fake):
    fake.queue(checked('{"thought": "the gear icon", "action": "click", "x": 640, "y": 360}',
                       model="gpt-4o-mini", size=(1280, 720), prompt_mentions="1280x720",
                       prompt_tokens=1234, completion_tokens=56, cached=1000))
    chat = provider(fake)
    turn = chat.turn(OBSERVATION, [])

    [request] = fake.requests
    assert request.headers["authorization"] == "Bearer not-needed"
    body = request.body
    assert body["max_tokens"] == 1024 and body["temperature"] == 0.0
    first = texts(body["messages"][1])
    assert INSTRUCTION in first and "http://example.test/" in first
    assert images(request)[0].getpixel((10, 10)) == (30, 60, 90)  # the frame's colours, RGB not BGR

    assert chat.name == "chat/gpt-4o-mini"
    assert turn.parse_error is None
    assert [c.actions for c in turn.calls] == [[Click(x=960, y=540)]]
    assert turn.calls[0].raw["x"] == 640  # the model's own coordinates, for the trace
    assert turn.reasoning == "the gear icon"
    assert turn.image_size == (1280, 720)
    assert (turn.usage.input_tokens, turn.usage.output_tokens, turn.usage.cache_read_tokens) == (1234, 56, 1000)


def test_json_dialect_full_size_image(fake):
    fake.queue(checked('{"action": "click", "x": 1919, "y": 1079}', model="llava", size=(1920, 1080),
                       prompt_mentions="1920x1080"))
    turn = provider(fake, model="llava", image_size=(1920, 1080)).turn(OBSERVATION, [])
    assert turn.calls[0].actions == [Click(x=1919, y=1079)]


def test_uitars_1_5_sends_the_smart_resized_image(fake):
    reply = "Thought: The gear icon opens settings.\nAction: click(start_box='<|box_start|>(966,546)<|box_end|>')"
    fake.queue(checked(reply, model="ByteDance-Seed/UI-TARS-1.5-7B", size=(1932, 1092), prompt_mentions="1932x1092"))
    turn = provider(fake, model="ByteDance-Seed/UI-TARS-1.5-7B").turn(OBSERVATION, [])
    assert turn.calls[0].actions == [Click(x=960, y=540)]
    assert turn.reasoning == "The gear icon opens settings."
    assert turn.image_size == (1932, 1092)


def test_uitars_1_0_relative(fake):
    fake.queue(checked("Thought: t\nAction: click(start_box='(500,500)')", model="ui-tars-7b-dpo",
                       size=(1920, 1080), prompt_mentions="0 to 1000"))
    turn = provider(fake, model="ui-tars-7b-dpo").turn(OBSERVATION, [])
    assert turn.calls[0].actions == [Click(x=960, y=540)]


def test_qwen25_tool_call(fake):
    reply = '<tool_call>\n{"name": "computer_use", "arguments": {"action": "type", "text": "hello\\n"}}\n</tool_call>'
    fake.queue(checked(reply, model="Qwen/Qwen2.5-VL-7B-Instruct", size=(1932, 1092), prompt_mentions="<tools>"))
    turn = provider(fake, model="Qwen/Qwen2.5-VL-7B-Instruct").turn(OBSERVATION, [])
    assert turn.calls[0].actions == [Type(text="hello"), Key(keys=["enter"])]


def test_qwen3_relative_and_dialect_override(fake):
    reply = ('<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [500, 500]}}'
             '</tool_call>')
    fake.queue(checked(reply, model="my-finetune", size=(1920, 1080), prompt_mentions="0 to 1000"))
    turn = provider(fake, model="my-finetune", dialect="qwen3").turn(OBSERVATION, [])
    assert turn.calls[0].actions == [Click(x=960, y=540)]


def test_unknown_dialect_is_refused():
    with pytest.raises(ValueError, match="unknown chat dialect 'yaml'"):
        ChatProvider(INSTRUCTION, model="m", dialect="yaml", base_url="http://127.0.0.1:9/v1")


def test_base_url_and_key_from_the_environment(fake, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", fake.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    fake.queue(Reply(200, completion('{"action": "done", "answer": "ok"}')))
    turn = ChatProvider(INSTRUCTION, model="m", timeout=10).turn(OBSERVATION, [])
    assert fake.requests[0].headers["authorization"] == "Bearer sk-local"
    assert turn.calls[0].actions == [Done(answer="ok")]


# --- conversation -----------------------------------------------------------------------------------


def test_history_results_and_bounded_images(fake):
    replies = ['{"action": "click", "x": 10, "y": 10}', '{"action": "key", "keys": "hyperdrive"}',
               '{"action": "type", "text": "a"}', '{"action": "done"}']
    fake.queue(*(Reply(200, completion(r)) for r in replies))
    chat = provider(fake)
    turn = chat.turn(OBSERVATION, [])
    turn = chat.turn(OBSERVATION, [CallResult(turn.calls[0].id, ok=True)])
    assert turn.calls[0].error.startswith("key: keys: unknown key name 'hyperdrive'")
    turn = chat.turn(OBSERVATION, [CallResult(turn.calls[0].id, ok=False, error=turn.calls[0].error)])
    chat.turn(OBSERVATION, [CallResult(turn.calls[0].id, ok=True, output="typed 1 character")])

    messages = fake.requests[-1].body["messages"]
    assert [m["role"] for m in messages] == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert [m["content"] for m in messages if m["role"] == "assistant"] == replies[:3]
    assert "Result of click: done" in texts(messages[3])
    assert "Result of key: failed: key: keys: unknown key name 'hyperdrive'" in texts(messages[5])
    assert "Result of type: done (typed 1 character)" in texts(messages[7])
    assert INSTRUCTION in texts(messages[1])  # the task stays in the conversation
    assert len(images(fake.requests[-1])) == 3  # only the latest screenshots are sent
    assert "earlier screenshot, omitted" in texts(messages[1])


def test_call_ids_are_unique_across_turns(fake):
    fake.queue(*(Reply(200, completion('{"action": "wait"}')) for _ in range(2)))
    chat = provider(fake)
    first = chat.turn(OBSERVATION, []).calls[0].id
    second = chat.turn(OBSERVATION, [CallResult(first, ok=True)]).calls[0].id
    assert first != second


def test_malformed_reply_is_a_parse_error_and_the_note_reaches_the_model(fake):
    fake.queue(Reply(200, completion("I would click on the settings icon.")),
               Reply(200, completion('{"action": "click", "x": 640, "y": 360}')))
    chat = provider(fake)
    turn = chat.turn(OBSERVATION, [])
    assert turn.calls == []
    assert 'no JSON object with an "action" field' in turn.parse_error
    assert turn.text == "I would click on the settings icon."

    note = "Your last reply could not be parsed: " + turn.parse_error
    turn = chat.turn(OBSERVATION, [], note=note)
    assert turn.calls[0].actions == [Click(x=960, y=540)]
    messages = fake.requests[-1].body["messages"]
    assert messages[2] == {"role": "assistant", "content": "I would click on the settings icon."}
    assert note in texts(messages[3])


def test_a_cut_off_reply_says_so(fake):
    fake.queue(Reply(200, completion('{"thought": "a long thought', finish_reason="length")))
    turn = provider(fake).turn(OBSERVATION, [])
    assert "cut off at max_tokens" in turn.parse_error


def test_empty_choices_is_a_parse_error(fake):
    body = completion("")
    body["choices"] = []
    fake.queue(Reply(200, body))
    assert provider(fake).turn(OBSERVATION, []).parse_error


# --- errors -----------------------------------------------------------------------------------------


def test_rate_limit_is_transient_with_retry_after_and_the_turn_can_be_retried(fake):
    fake.queue(Reply(429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"retry-after": "7"}),
               Reply(200, completion('{"action": "click", "x": 640, "y": 360}')))
    chat = provider(fake)
    with pytest.raises(ModelCallError) as info:
        chat.turn(OBSERVATION, [])
    assert (info.value.transient, info.value.retry_after, info.value.status) == (True, 7.0, 429)
    assert len(fake.requests) == 1  # no SDK-side retries

    turn = chat.turn(OBSERVATION, [])  # the loop's retry: the failed attempt left no trace
    assert turn.calls[0].actions == [Click(x=960, y=540)]
    assert [m["role"] for m in fake.requests[-1].body["messages"]] == ["system", "user"]


def test_retry_after_ms(fake):
    fake.queue(Reply(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "1500"}))
    with pytest.raises(ModelCallError) as info:
        provider(fake).turn(OBSERVATION, [])
    assert info.value.retry_after == 1.5


def test_server_error_is_transient(fake):
    fake.queue(Reply(503, {"error": {"message": "model loading"}}))
    with pytest.raises(ModelCallError) as info:
        provider(fake).turn(OBSERVATION, [])
    assert info.value.transient and info.value.status == 503 and info.value.retry_after is None


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_are_not_transient(fake, status):
    fake.queue(Reply(status, {"error": {"message": "model 'x' not found"}}))
    with pytest.raises(ModelCallError) as info:
        provider(fake).turn(OBSERVATION, [])
    assert not info.value.transient and info.value.status == status


def test_unreachable_server_is_transient():
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    chat = ChatProvider(INSTRUCTION, model="m", base_url=f"http://127.0.0.1:{port}/v1", timeout=5)
    with pytest.raises(ModelCallError) as info:
        chat.turn(OBSERVATION, [])
    assert info.value.transient and info.value.status is None
    assert "unreachable" in str(info.value)


def test_timeout_is_transient():
    import socket

    with socket.socket() as sock:  # accepts connections (the kernel's backlog) and never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        chat = ChatProvider(INSTRUCTION, model="m", base_url=f"http://127.0.0.1:{sock.getsockname()[1]}/v1",
                            timeout=0.3)
        with pytest.raises(ModelCallError) as info:
            chat.turn(OBSERVATION, [])
    assert info.value.transient and "did not answer in time" in str(info.value)


def test_error_message_is_the_servers_own_sentence(fake):
    fake.queue(Reply(400, {"error": {"message": "bad request"}}))
    with pytest.raises(ModelCallError) as info:
        provider(fake).turn(OBSERVATION, [])
    assert str(info.value) == "chat server answered HTTP 400: bad request"


# --- the current open models' dialects (vision.providers.chat: uitars-2, opencua, gta1, holo1.5) ---------------


def test_uitars2_several_calls_in_one_turn(fake):
    reply = ("<gui_think> The settings gear is top right. </gui_think>\n<seed:tool_call><function=click>"
             "<parameter=point><point>500 500</point></parameter></function><function=hotkey><parameter=key>"
             "ctrl l</parameter></function></seed:tool_call>")
    fake.queue(checked(reply, model="ByteDance-Seed/UI-TARS-2", size=(1920, 1080), prompt_mentions="<seed:tool_call>"))
    turn = provider(fake, model="ByteDance-Seed/UI-TARS-2").turn(OBSERVATION, [])
    assert [c.actions for c in turn.calls] == [[Click(x=960, y=540)], [Key(keys=["ctrl+l"])]]
    assert turn.reasoning == "The settings gear is top right."


def test_opencua_sends_the_smart_resized_image_and_reads_its_code(fake):
    reply = ("## Thought:\nThe gear icon opens settings.\n## Action:\nClick the gear icon.\n## Code:\n"
             "```python\npyautogui.click(x=966, y=546)\n```")
    fake.queue(checked(reply, model="xlangai/OpenCUA-7B", size=(1932, 1092), prompt_mentions="1932x1092"))
    turn = provider(fake, model="xlangai/OpenCUA-7B").turn(OBSERVATION, [])
    assert turn.calls[0].actions == [Click(x=960, y=540)]
    assert turn.reasoning == "The gear icon opens settings.\nClick the gear icon."


@pytest.mark.parametrize("model, reply", [("HelloKKMe/GTA1-7B", "(966,546)"),
                                          ("Hcompany/Holo1.5-7B", '{"action": "click_absolute", "x": 966, "y": 546}')])
def test_a_grounding_model_locates_once_then_the_run_is_done(fake, model, reply):
    fake.queue(checked("(2000,5)" if "GTA1" in model else '{"action": "click_absolute", "x": 2000, "y": 5}',
                       model=model, size=(1932, 1092), prompt_mentions="1932"),
               checked(reply, model=model, size=(1932, 1092), prompt_mentions="1932"))
    chat = provider(fake, model=model)
    off = chat.turn(OBSERVATION, [])
    assert "off the screen" in off.calls[0].error
    # Asked again on the current screen, the description alone: no history, no results.
    turn = chat.turn(OBSERVATION, [CallResult(off.calls[0].id, ok=False, error=off.calls[0].error)])
    assert turn.calls[0].actions == [Click(x=960, y=540)]
    for request in fake.requests:
        messages = request.body["messages"]
        assert [m["role"] for m in messages] == ["system", "user"]
        assert texts(messages[1]) == INSTRUCTION and len(images(request)) == 1
    # The click was performed: done, without another request.
    done = chat.turn(OBSERVATION, [CallResult(turn.calls[0].id, ok=True)])
    assert done.done and done.answer == f"clicked {INSTRUCTION!r} at display pixel (960, 540)"
    assert len(fake.requests) == 2
