"""Action validation before anything runs: screen bounds, x/y pairs, regions, and readable errors."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from desktop.actions import (
    INPUT_ACTIONS,
    SCREEN_HEIGHT,
    SCREEN_WIDTH,
    Click,
    DoubleClick,
    Drag,
    HoldKey,
    InputAction,
    Key,
    MouseDown,
    MouseUp,
    Move,
    Point,
    Region,
    Scroll,
    TripleClick,
    Type,
    Wait,
    Zoom,
)
from desktop.errors import (
    ActionFailedError,
    GlassdeskError,
    InvalidAction,
    SessionLimit,
    SessionNotFound,
    describe_errors,
    describe_validation,
)

ANY = TypeAdapter(InputAction)


def test_the_screen_is_1920_by_1080():
    assert (SCREEN_WIDTH, SCREEN_HEIGHT) == (1920, 1080)


@pytest.mark.parametrize("cls", [Click, DoubleClick, TripleClick, Move, MouseDown, MouseUp, Scroll])
@pytest.mark.parametrize("x,y,field", [(1920, 0, "x"), (0, 1080, "y"), (-1, 5, "x"), (5, -1, "y"), (5000, 5000, "x")])
def test_off_screen_coordinates_are_refused(cls, x, y, field):
    with pytest.raises(ValidationError) as info:
        cls(x=x, y=y)
    assert field in {str(p) for e in info.value.errors() for p in e["loc"]}


@pytest.mark.parametrize("cls", [Click, DoubleClick, TripleClick, Move, MouseDown, MouseUp, Scroll])
@pytest.mark.parametrize("x,y", [(0, 0), (1919, 1079), (1919, 0), (0, 1079), (960, 540)])
def test_the_edges_of_the_screen_are_accepted(cls, x, y):
    action = cls(x=x, y=y)
    assert (action.x, action.y) == (x, y)


@pytest.mark.parametrize("cls", [Click, DoubleClick, TripleClick, MouseDown, MouseUp, Scroll])
def test_x_and_y_come_together_or_not_at_all(cls):
    with pytest.raises(ValidationError, match="both x and y"):
        cls(x=5)
    with pytest.raises(ValidationError, match="both x and y"):
        cls(y=5)
    neither = cls()
    assert neither.x is None and neither.y is None


def test_move_needs_a_point():
    with pytest.raises(ValidationError):
        Move()
    with pytest.raises(ValidationError):
        Move(x=1)


def test_drag_path_points_are_bounded_and_the_path_has_two_or_more():
    with pytest.raises(ValidationError, match="path.1.x"):
        ANY.validate_python({"action": "drag", "path": [{"x": 0, "y": 0}, {"x": 1920, "y": 0}]})
    with pytest.raises(ValidationError):
        Drag(path=[Point(x=0, y=0)])
    with pytest.raises(ValidationError):
        Point(x=0, y=1080)
    assert len(Drag(path=[{"x": 0, "y": 0}, {"x": 1919, "y": 1079}]).path) == 2


def test_unknown_fields_are_refused_not_ignored():
    with pytest.raises(ValidationError, match="extra"):
        Click(x=1, y=1, extra=True)
    with pytest.raises(ValidationError):
        Click(x=1, y=1, modifier="ctrl")  # the field is "modifiers"


def test_modifiers_must_be_key_names():
    assert Click(modifiers=["ctrl", "shift"]).modifiers == ["ctrl", "shift"]
    with pytest.raises(ValidationError, match="hyper-ctrl"):
        Click(modifiers=["hyper-ctrl"])
    with pytest.raises(ValidationError, match="nokey"):
        Drag(path=[Point(x=0, y=0), Point(x=1, y=1)], modifiers=["nokey"])


@pytest.mark.parametrize("amount,ok", [(0, False), (1, True), (50, True), (51, False)])
def test_scroll_amount(amount, ok):
    if ok:
        assert Scroll(amount=amount).amount == amount
    else:
        with pytest.raises(ValidationError):
            Scroll(amount=amount)


def test_scroll_direction_and_button_are_closed_sets():
    with pytest.raises(ValidationError):
        Scroll(direction="sideways")
    with pytest.raises(ValidationError):
        Click(button="fourth")


def test_type_text():
    with pytest.raises(ValidationError):
        Type(text="")
    with pytest.raises(ValidationError, match="NUL"):
        Type(text="a\x00b")
    assert Type(text="héllo ✓ 日本語").text == "héllo ✓ 日本語"


def test_durations_are_bounded():
    with pytest.raises(ValidationError):
        Wait(duration_ms=-1)
    with pytest.raises(ValidationError):
        Wait(duration_ms=30_001)
    with pytest.raises(ValidationError):
        HoldKey(keys="shift", duration_ms=10_001)


def test_the_union_picks_the_action_by_name():
    assert isinstance(ANY.validate_python({"action": "click", "x": 1, "y": 2}), Click)
    assert isinstance(ANY.validate_python({"action": "key", "keys": "ctrl+a"}), Key)
    assert isinstance(ANY.validate_python({"action": "wait"}), Wait)
    with pytest.raises(ValidationError):
        ANY.validate_python({"action": "teleport", "x": 1, "y": 2})


def test_input_actions_registry():
    assert set(INPUT_ACTIONS) == {"click", "double_click", "triple_click", "move", "mouse_down", "mouse_up",
                                  "drag", "scroll", "type", "key", "hold_key", "wait"}
    for name, cls in INPUT_ACTIONS.items():
        assert cls.model_fields["action"].default == name


# ------------------------------------------------------------------ regions


def test_region_from_fields_and_from_a_list():
    assert Region(x0=10, y0=20, x1=110, y1=70) == Region.model_validate([10, 20, 110, 70])
    region = Region.model_validate((0, 0, 1920, 1080))
    assert (region.width, region.height) == (1920, 1080)


@pytest.mark.parametrize("value,message", [
    ([10, 10, 10, 20], "x0 < x1"),
    ([10, 10, 5, 20], "x0 < x1"),
    ([10, 20, 30, 20], "y0 < y1"),
    ([0, 0, 10], r"\[x0, y0, x1, y1\]"),
    ([0, 0, 1, 1, 1], r"\[x0, y0, x1, y1\]"),
    ([0, 0, 1921, 10], "x1"),
    ([0, 0, 10, 1081], "y1"),
    ([-1, 0, 10, 10], "x0"),
    ([1920, 0, 1920, 10], "x0"),
])
def test_bad_regions_are_refused_with_the_reason(value, message):
    with pytest.raises(ValidationError, match=message):
        Region.model_validate(value)


def test_zoom_takes_a_region_and_a_bounded_scale():
    zoom = Zoom(region=[0, 0, 100, 50], scale=2)
    assert zoom.region.width == 100 and zoom.scale == 2
    for scale in (0, -1, 4.5):
        with pytest.raises(ValidationError):
            Zoom(region=[0, 0, 100, 50], scale=scale)


# ------------------------------------------------------------------ readable errors


def _errors(data) -> str:
    with pytest.raises(ValidationError) as info:
        ANY.validate_python(data)
    return describe_validation(info.value)


def test_describe_errors_names_the_field_without_union_noise():
    text = _errors({"action": "click", "x": 1920, "y": 3})
    assert text == "x: Input should be less than or equal to 1919"


def test_describe_errors_for_a_nested_path_point():
    text = _errors({"action": "drag", "path": [{"x": 0, "y": 0}, {"x": 0, "y": 1080}]})
    assert text == "path.1.y: Input should be less than or equal to 1079"


def test_describe_errors_drops_pydantic_prefixes():
    text = _errors({"action": "key", "keys": ["ctrl+bogus"]})
    assert text.startswith("keys: unknown key name 'bogus'")
    assert "Value error" not in text
    text = _errors({"action": "click", "x": 5})
    assert "give both x and y" in text and "Value error" not in text


def test_describe_errors_joins_several_and_drops_the_request_body_part():
    errors = [
        {"loc": ("body", "x"), "msg": "Input should be less than or equal to 1919"},
        {"loc": ("body", "click", "y"), "msg": "Input should be greater than or equal to 0"},
        {"loc": ("body",), "msg": "Value error, give both x and y"},
    ]
    assert describe_errors(errors) == ("x: Input should be less than or equal to 1919; "
                                       "y: Input should be greater than or equal to 0; give both x and y")


def test_typed_errors_carry_code_status_and_detail():
    assert (InvalidAction.code, InvalidAction.status) == ("invalid_action", 422)
    assert (SessionNotFound.code, SessionNotFound.status) == ("session_not_found", 404)
    assert (SessionLimit.code, SessionLimit.status) == ("session_limit", 429)
    err = ActionFailedError("xdotool exited with 1: boom", argv=["xdotool", "click", "1"], stderr="boom")
    assert err.status == 500 and isinstance(err, GlassdeskError)
    assert err.to_dict() == {"code": "action_failed", "message": "xdotool exited with 1: boom",
                             "detail": {"argv": ["xdotool", "click", "1"], "stderr": "boom"}}
    assert InvalidAction("x: too big").to_dict() == {"code": "invalid_action", "message": "x: too big"}


@pytest.mark.parametrize(("action", "meant"), [
    (Click(x=1, y=1), True), (Type(text="a"), True), (Scroll(x=1, y=1, direction="down"), True),
    (Key(keys=["enter"]), True), (Key(keys=["ctrl+c", "enter"]), True), (Move(x=1, y=1), False),
    # A copy, however a vendor's model names its keys, changes nothing on the screen.
    (Key(keys=["ctrl+c"]), False), (Key(keys=["control+C"]), False), (Key(keys=["Ctrl+Shift+c"]), False),
    (Key(keys=["rctrl+insert"]), False), (Key(keys=["ctrl+v"]), True),
])
def test_the_actions_meant_to_change_the_screen(action, meant):
    from vision.actions import expects_effect

    assert expects_effect(action) is meant
