"""Action -> xdotool argv, built as pure data: what would run, checked without an X server."""

from __future__ import annotations

import re

import pytest

from desktop.actions import (
    Click,
    DoubleClick,
    Drag,
    HoldKey,
    Key,
    MouseDown,
    MouseUp,
    Move,
    Point,
    Scroll,
    TripleClick,
    Type,
    Wait,
)
from desktop.x11 import input as inp
from desktop.x11.input import Keymap, argv_for, plan_type


def one(action) -> list[str]:
    commands = argv_for(action)
    assert len(commands) == 1, commands
    assert commands[0][0] == "xdotool"
    assert all(isinstance(a, str) for a in commands[0])
    return commands[0]


def index(argv: list[str], *seq: str) -> int:
    """Where the contiguous run ``seq`` starts in argv (fails if absent)."""
    for i in range(len(argv) - len(seq) + 1):
        if argv[i:i + len(seq)] == list(seq):
            return i
    raise AssertionError(f"{seq} not in {argv}")


# ------------------------------------------------------------------ clicks


def test_click_at_a_point_moves_then_clicks_with_no_delay():
    argv = one(Click(x=10, y=20))
    assert argv == ["xdotool", "mousemove", "10", "20", "click", "--repeat", "1", "--delay", "0", "1"]


def test_click_without_coordinates_clicks_where_the_pointer_is():
    argv = one(Click())
    assert "mousemove" not in argv
    assert argv == ["xdotool", "click", "--repeat", "1", "--delay", "0", "1"]


@pytest.mark.parametrize("button,code",
                         [("left", "1"), ("middle", "2"), ("right", "3"), ("back", "8"), ("forward", "9")])
def test_buttons(button, code):
    argv = one(Click(x=1, y=2, button=button))
    assert argv[-1] == code
    assert argv[index(argv, "--delay") + 1] == "0"


def test_no_action_uses_sync_which_hangs_when_the_pointer_is_already_there():
    actions = [Click(x=5, y=5), Click(), DoubleClick(x=5, y=5), TripleClick(x=5, y=5), Move(x=5, y=5),
               MouseDown(x=5, y=5), MouseUp(), Scroll(x=5, y=5), Click(x=5, y=5, modifiers=["ctrl"]),
               Drag(path=[Point(x=0, y=0), Point(x=500, y=300)])]
    for action in actions:
        for argv in argv_for(action):
            assert "--sync" not in argv, (action, argv)


def test_click_with_modifiers_holds_them_around_the_click_and_releases_in_reverse():
    argv = one(Click(x=100, y=200, modifiers=["ctrl", "shift"]))
    move = index(argv, "mousemove", "100", "200")
    down = index(argv, "keydown", "Control_L", "Shift_L")
    click = index(argv, "click", "--repeat", "1", "--delay", "0", "1")
    up = index(argv, "keyup", "Shift_L", "Control_L")
    assert move < down < click < up
    assert argv.count("keydown") == 1 and argv.count("keyup") == 1
    # Anything between keydown/click/keyup may only be xdotool's own `sleep`.
    for i in range(down + 3, click):
        assert argv[i] == "sleep" or re.fullmatch(r"\d+(\.\d+)?", argv[i]), argv
    for i in range(click + 7, up):
        assert argv[i] == "sleep" or re.fullmatch(r"\d+(\.\d+)?", argv[i]), argv


def test_modifier_aliases_become_keysyms():
    argv = one(Click(modifiers=["cmd", "alt"]))
    assert index(argv, "keydown", "Super_L", "Alt_L") < index(argv, "keyup", "Alt_L", "Super_L")


@pytest.mark.parametrize("cls,repeat", [(DoubleClick, "2"), (TripleClick, "3")])
def test_double_and_triple_click_repeat_with_a_gap_inside_the_double_click_time(cls, repeat):
    argv = one(cls(x=300, y=400))
    at = index(argv, "click", "--repeat", repeat)
    delay = int(argv[index(argv, "--delay") + 1])
    assert 0 < delay < 400
    assert argv[:4] == ["xdotool", "mousemove", "300", "400"]
    assert argv[-1] == "1" and at > 3


def test_move():
    assert one(Move(x=1919, y=1079)) == ["xdotool", "mousemove", "1919", "1079"]


def test_mouse_down_and_up():
    assert one(MouseDown(x=3, y=4)) == ["xdotool", "mousemove", "3", "4", "mousedown", "1"]
    assert one(MouseDown(button="right")) == ["xdotool", "mousedown", "3"]
    assert one(MouseUp(x=7, y=8, button="middle")) == ["xdotool", "mousemove", "7", "8", "mouseup", "2"]
    assert one(MouseUp()) == ["xdotool", "mouseup", "1"]


# ------------------------------------------------------------------ drag


def _moves(argv: list[str]) -> list[tuple[int, int]]:
    return [(int(argv[i + 1]), int(argv[i + 2])) for i, a in enumerate(argv) if a == "mousemove"]


def test_drag_presses_at_the_start_releases_at_the_end_and_moves_in_small_steps():
    argv = one(Drag(path=[Point(x=100, y=372), Point(x=700, y=372)]))
    moves = _moves(argv)
    assert moves[0] == (100, 372) and moves[-1] == (700, 372)
    press, release = argv.index("mousedown"), argv.index("mouseup")
    assert argv[press + 1] == "1" and argv[release + 1] == "1"
    # pressed after the first move, released after the last one
    first_move, last_move = index(argv, "mousemove", "100", "372"), index(argv, "mousemove", "700", "372")
    assert first_move < press < last_move < release
    steps = list(zip(moves, moves[1:]))
    assert len(steps) >= 600 // inp.DRAG_STEP_PX
    for (ax, ay), (bx, by) in steps:
        assert max(abs(bx - ax), abs(by - ay)) <= inp.DRAG_STEP_PX + 1
        assert ax <= bx  # monotone along the way


def test_drag_passes_through_every_waypoint():
    path = [Point(x=10, y=10), Point(x=200, y=10), Point(x=200, y=300), Point(x=11, y=12)]
    moves = _moves(one(Drag(path=path)))
    for p in path:
        assert (p.x, p.y) in moves
    assert moves[0] == (10, 10) and moves[-1] == (11, 12)


def test_short_drag_still_has_both_endpoints():
    moves = _moves(one(Drag(path=[Point(x=5, y=5), Point(x=6, y=5)])))
    assert moves == [(5, 5), (6, 5)]


def test_drag_with_a_modifier_and_another_button():
    argv = one(Drag(path=[Point(x=0, y=0), Point(x=50, y=50)], button="right", modifiers=["shift"]))
    assert (index(argv, "keydown", "Shift_L") < argv.index("mousedown") < argv.index("mouseup")
            < index(argv, "keyup", "Shift_L"))
    assert argv[argv.index("mousedown") + 1] == "3"


# ------------------------------------------------------------------ scroll


@pytest.mark.parametrize("direction,button", [("up", "4"), ("down", "5"), ("left", "6"), ("right", "7")])
def test_scroll_buttons_and_amount(direction, button):
    argv = one(Scroll(x=960, y=600, direction=direction, amount=7))
    assert argv[:4] == ["xdotool", "mousemove", "960", "600"]
    at = index(argv, "click", "--repeat", "7")
    assert argv[-1] == button and at > 3


def test_scroll_defaults_and_at_the_pointer():
    argv = one(Scroll())
    assert "mousemove" not in argv
    assert index(argv, "click", "--repeat", "3") and argv[-1] == "5"


def test_scroll_with_ctrl_held():
    argv = one(Scroll(x=1, y=1, direction="up", amount=2, modifiers=["ctrl"]))
    assert (index(argv, "keydown", "Control_L") < index(argv, "click", "--repeat", "2")
            < index(argv, "keyup", "Control_L"))


# ------------------------------------------------------------------ keys


def test_key_sequence_is_one_xdotool_key_call():
    argv = one(Key(keys=["ctrl+a", "Delete", "CTRL+SHIFT+T", "enter"]))
    assert argv[:2] == ["xdotool", "key"]
    assert argv[-4:] == ["Control_L+a", "Delete", "Control_L+Shift_L+t", "Return"]


def test_key_from_a_space_separated_string():
    assert one(Key(keys="ctrl+l esc"))[-2:] == ["Control_L+l", "Escape"]


def test_hold_key_downs_sleeps_and_ups():
    argv = one(HoldKey(keys="shift", duration_ms=1500))
    assert argv == ["xdotool", "keydown", "Shift_L", "sleep", "1.5", "keyup", "Shift_L"]
    argv = one(HoldKey(keys="ctrl+alt", duration_ms=250))
    assert argv == ["xdotool", "keydown", "Control_L+Alt_L", "sleep", "0.25", "keyup", "Control_L+Alt_L"]


def test_wait_runs_nothing():
    assert argv_for(Wait(duration_ms=10)) == []


def test_argv_for_refuses_what_is_not_an_input_action():
    from desktop.actions import Region, Zoom

    with pytest.raises(TypeError):
        argv_for(Zoom(region=Region(x0=0, y0=0, x1=10, y1=10)))


# ------------------------------------------------------------------ typing


def _typed(commands) -> list[str]:
    chunks = []
    for argv in commands:
        if argv[:2] in (["xdotool", "type"], [inp.XTEST, "type"]):
            assert argv[-2] == "--", argv  # end of options: text starting with '-' is text
            chunks.append(argv[-1])
    return chunks


def test_type_is_chunked_and_every_chunk_follows_double_dash():
    text = "".join(chr(ord("a") + i % 26) for i in range(inp.TYPE_CHUNK + 7))
    commands = plan_type(text)
    assert len(commands) == 2
    chunks = _typed(commands)
    assert "".join(chunks) == text
    assert all(len(c) <= inp.TYPE_CHUNK for c in chunks)
    for argv in commands:
        assert argv[:4] == ["xdotool", "type", "--delay", str(inp.TYPE_DELAY_MS)]
        assert len(argv) == 6


def test_long_text_takes_the_fast_path_in_large_chunks():
    text = "".join(chr(ord("a") + i % 26) for i in range(inp.FAST_TYPE_CHUNK * 2 + 7))
    commands = plan_type(text)
    assert len(commands) == 3
    chunks = _typed(commands)
    assert "".join(chunks) == text
    assert all(len(c) <= inp.FAST_TYPE_CHUNK for c in chunks)
    assert all(argv[:3] == [inp.XTEST, "type", "--"] and len(argv) == 4 for argv in commands)


def test_the_fast_path_starts_at_its_threshold():
    assert plan_type("x" * (inp.FAST_TYPE_MIN_CHARS - 1))[0][0] == "xdotool"
    assert plan_type("x" * inp.FAST_TYPE_MIN_CHARS)[0][0] == inp.XTEST


@pytest.mark.parametrize("length", [5, 500])
def test_caps_lock_is_switched_off_around_the_typing_and_back_on(length):
    text = "abc Hello "[:length] if length < 10 else "abc Hello " * (length // 10)
    commands = plan_type(text, caps_lock=True)
    assert commands[0] == commands[-1] == ["xdotool", "key", "Caps_Lock"]
    assert "".join(_typed(commands[1:-1])) == text
    assert ["xdotool", "key", "Caps_Lock"] not in plan_type(text)


def test_type_keysym_of_latin1_unicode_and_whitespace():
    assert inp.type_keysym("a") == ord("a") and inp.type_keysym("~") == ord("~")
    assert inp.type_keysym("é") == 0xE9
    assert inp.type_keysym("日") == 0x01000000 + ord("日")
    assert inp.type_keysym("\n") == inp.type_keysym("\r") == 0xFF0D
    assert inp.type_keysym("\t") == 0xFF09


def test_keysym_table_prefers_a_first_level_over_a_shifted_one():
    # keycode 10: 1 / exclam; keycode 11: exclam unshifted (as on some layouts); keycode 12: a / A
    table = inp.keysym_table(10, [[ord("1"), ord("!")], [ord("!"), 0], [ord("a"), ord("A"), ord("a")], []])
    assert table[ord("1")] == (10, False)
    assert table[ord("!")] == (11, False)
    assert table[ord("A")] == (12, True)
    assert 0 not in table


def test_long_text_typing_is_expected_to_take_far_less_per_character():
    short, long = Type(text="x" * 99), Type(text="x" * 20000)
    assert inp.expected_ms(long) < 20000 * inp.TYPE_MS_PER_CHAR / 4
    assert inp.expected_ms(short) >= 99 * inp.TYPE_MS_PER_CHAR


@pytest.mark.parametrize("text", [
    '$HOME; rm -rf / && `id` | cat >/tmp/x "q" \'s\'',
    "--help",
    "-d 100 --window 1",
    "line one\nline two\ttabbed",
    'héllo wörld ✓ 日本語 "quotes" $HOME; rm -rf /',
])
def test_hostile_text_stays_one_argv_element(text):
    assert len(text) <= inp.TYPE_CHUNK
    commands = argv_for(Type(text=text))
    assert commands == [["xdotool", "type", "--delay", str(inp.TYPE_DELAY_MS), "--", text]]


def test_long_hostile_text_is_split_only_between_argv_elements():
    text = ('"; $(reboot) `id` $HOME ' * 10)[:-1]
    commands = argv_for(Type(text=text))
    assert "".join(_typed(commands)) == text
    assert all(argv[-2] == "--" for argv in commands)


def test_no_keymap_means_no_xmodmap():
    assert all(argv[0] == "xdotool" for argv in plan_type("日本語 ✓ é"))


PKE = """\
keycode   8 =
keycode   9 = Escape NoSymbol Escape
keycode  10 = 1 exclam 1 exclam
keycode  24 = q Q q Q
keycode  26 = e E e E
keycode  37 = Control_L NoSymbol Control_L
keycode  50 = Shift_L NoSymbol Shift_L
keycode  65 = space NoSymbol space
keycode  93 =
keycode  97 =
keycode 108 = Alt_R Meta_R Alt_R Meta_R
keycode 120 = eacute Eacute eacute Eacute
keycode 149 =
keycode 154 =
keycode 255 =
"""


def test_keymap_parse_reads_present_keysyms_and_spare_keycodes():
    keymap = Keymap.parse(PKE)
    assert {"Escape", "q", "Q", "Control_L", "space", "eacute", "Meta_R"} <= keymap.present
    assert keymap.spare == [93, 97, 149, 154, 255]  # keycode 8 is left alone
    assert keymap.bound == {}


def test_keymap_parse_ignores_other_lines():
    keymap = Keymap.parse("xmodmap:  up to 4 keys per modifier\n\n" + PKE + "garbage = line\n")
    assert keymap.spare == [93, 97, 149, 154, 255]


def _simulate(commands, keymap_present: set[str]):
    """Apply each xmodmap to a model of the server's map; check every typed character is on the
    map when its chunk is typed. Returns the number of keysyms bound per xmodmap call."""
    mapping: dict[int, str] = {}
    binds = []
    pending_bind = False
    for argv in commands:
        if argv[0] == "xmodmap":
            assert not pending_bind, "two xmodmap calls for one chunk"
            pending_bind = True
            expressions = argv[1:]
            assert expressions[::2] == ["-e"] * (len(expressions) // 2)
            count = 0
            for expr in expressions[1::2]:
                m = re.fullmatch(r"keycode (\d+) = (\S+) (\S+)", expr)
                assert m and m.group(2) == m.group(3), expr
                mapping[int(m.group(1))] = m.group(2)
                count += 1
            binds.append(count)
        elif argv[0] == "sleep":
            continue
        else:
            assert argv[:2] in (["xdotool", "type"], [inp.XTEST, "type"])
            pending_bind = False
            on_map = keymap_present | set(mapping.values())
            from desktop import keys

            for char in argv[-1]:
                if not char.isascii():
                    assert keys.keysym(char) in on_map, (char, argv[-1])
    return binds


def test_plan_type_binds_unmapped_characters_once_per_chunk():
    keymap = Keymap.parse(PKE)
    text = "é日本語✓ and 日本語 again"
    commands = plan_type(text, keymap)
    assert "".join(_typed(commands)) == text
    xmodmaps = [c for c in commands if c[0] == "xmodmap"]
    assert len(xmodmaps) == 1
    bound = " ".join(xmodmaps[0])
    # each new keysym once, eacute was already on the map
    for name in ("U65E5", "U672C", "U8A9E", "U2713"):
        assert bound.count(f"= {name} ") == 1
    assert "eacute" not in bound
    assert _simulate(commands, Keymap.parse(PKE).present) == [4]
    # the mapping pause follows the xmodmap, before the typing
    at = commands.index(xmodmaps[0])
    assert commands[at + 1][0] == "sleep" and commands[at + 2][:2] == ["xdotool", "type"]


def test_plan_type_never_binds_more_keysyms_than_spare_keycodes():
    keymap = Keymap.parse(PKE)  # 5 spare keycodes
    text = "".join(chr(0x4E00 + i) for i in range(23)) + " tail"
    commands = plan_type(text, keymap)
    assert "".join(_typed(commands)) == text
    binds = _simulate(commands, Keymap.parse(PKE).present)
    assert binds and max(binds) <= 5
    assert sum(binds) == 23  # every new character bound exactly once


def test_plan_type_reuses_characters_already_bound():
    keymap = Keymap.parse(PKE)
    first = plan_type("日本", keymap)
    second = plan_type("本日", keymap)
    assert [c[0] for c in first].count("xmodmap") == 1
    assert all(c[0] != "xmodmap" for c in second)


def test_plan_type_ascii_only_needs_no_binding():
    commands = plan_type("plain ascii text", Keymap.parse(PKE))
    assert commands == [["xdotool", "type", "--delay", str(inp.TYPE_DELAY_MS), "--", "plain ascii text"]]


def test_plan_type_with_no_spare_keycodes_leaves_it_to_xdotool():
    keymap = Keymap(present={"a"}, spare=[], bound={})
    commands = plan_type("日本語", keymap)
    assert all(argv[:2] == ["xdotool", "type"] for argv in commands)
    assert "".join(_typed(commands)) == "日本語"


def test_keymap_bind_recycles_the_least_recently_bound_keycode():
    keymap = Keymap(present=set(), spare=[200, 201], bound={})
    assert keymap.bind(["U65E5", "U672C"]) == ["-e", "keycode 200 = U65E5 U65E5", "-e", "keycode 201 = U672C U672C"]
    assert keymap.bind(["U8A9E"]) == ["-e", "keycode 200 = U8A9E U8A9E"]
    assert "U65E5" not in keymap.present and {"U672C", "U8A9E"} <= keymap.present


def test_long_unicode_text_binds_what_each_fast_chunk_needs_before_it():
    keymap = Keymap.parse(PKE)  # 5 spare keycodes
    text = ("日本語 ✓ é " * 40) + "".join(chr(0x4E00 + i) for i in range(12)) + " tail"
    commands = plan_type(text, keymap)
    assert any(argv[0] == inp.XTEST for argv in commands)
    assert "".join(_typed(commands)) == text
    binds = _simulate(commands, Keymap.parse(PKE).present)
    assert binds and max(binds) <= 5


def test_a_press_that_would_continue_the_last_ones_click_count_waits_out_the_double_click_time():
    last = inp.Press(at=100.0, x=500, y=300, button="left")
    wait = inp.separating_wait
    assert wait(None, "left", 500, 300, 100.1) == 0.0
    assert wait(last, "left", 503, 297, 100.1) == pytest.approx(inp.MULTI_CLICK_S - 0.1)  # within a few px
    assert wait(last, "left", 500 + inp.MULTI_CLICK_PX + 1, 300, 100.1) == 0.0  # elsewhere: its own click
    assert wait(last, "right", 500, 300, 100.1) == 0.0  # another button counts its own clicks
    assert wait(last, "left", 500, 300, 100.0 + inp.MULTI_CLICK_S) == 0.0  # long enough ago
    assert [inp.pressed_button(a) for a in (Click(x=1, y=2, button="right"), TripleClick(x=1, y=2), MouseDown(),
                                            MouseUp(), Move(x=1, y=2), Drag(path=[Point(x=1, y=1), Point(x=9, y=9)]))] \
        == ["right", "left", "left", None, None, None]
