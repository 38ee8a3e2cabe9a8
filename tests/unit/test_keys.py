"""Key names -> X keysyms: the aliases models send, chords, sequences, and clear refusals. No X."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from desktop import keys
from desktop.actions import HoldKey, Key
from desktop.keys import KeyNameError


@pytest.mark.parametrize("name,expected", [
    # modifiers, in the spellings models use
    ("ctrl", "Control_L"), ("Ctrl", "Control_L"), ("CTRL", "Control_L"), ("control", "Control_L"),
    ("alt", "Alt_L"), ("option", "Alt_L"),
    ("shift", "Shift_L"), ("SHIFT", "Shift_L"),
    ("cmd", "Super_L"), ("command", "Super_L"), ("super", "Super_L"), ("win", "Super_L"),
    ("windows", "Super_L"), ("meta", "Super_L"),
    # editing and navigation
    ("enter", "Return"), ("Enter", "Return"), ("return", "Return"), ("esc", "Escape"),
    ("Escape", "Escape"), ("tab", "Tab"), ("space", "space"), ("backspace", "BackSpace"),
    ("Backspace", "BackSpace"), ("delete", "Delete"), ("del", "Delete"),
    ("pageup", "Prior"), ("PageUp", "Prior"), ("page_down", "Next"), ("PAGE_DOWN", "Next"),
    ("pgdn", "Next"), ("home", "Home"), ("end", "End"),
    ("arrowleft", "Left"), ("ArrowLeft", "Left"), ("arrowright", "Right"), ("arrowup", "Up"),
    ("arrowdown", "Down"), ("left", "Left"), ("up", "Up"),
    # function keys
    ("f1", "F1"), ("f5", "F5"), ("F5", "F5"), ("F12", "F12"), ("f24", "F24"),
    # real keysyms pass as they are
    ("KP_Enter", "KP_Enter"), ("kp_enter", "KP_Enter"), ("BackSpace", "BackSpace"),
    ("Control_R", "Control_R"), ("XF86AudioMute", "XF86AudioMute"),
])
def test_aliases_and_keysyms(name, expected):
    assert keys.keysym(name) == expected


@pytest.mark.parametrize("char,expected", [
    ("a", "a"), ("A", "A"), ("7", "7"),
    ("/", "slash"), ("$", "dollar"), ("%", "percent"), ('"', "quotedbl"), (";", "semicolon"),
    ("+", "plus"), ("-", "minus"), (" ", "space"), ("~", "asciitilde"),
    # Latin-1 characters have named keysyms; everything else is Unicode Uxxxx
    ("é", "eacute"), ("ö", "odiaeresis"), ("ß", "ssharp"),
    ("✓", "U2713"), ("日", "U65E5"), ("€", "U20AC"), ("😀", "U1F600"),
])
def test_single_characters(char, expected):
    assert keys.keysym(char) == expected


def test_chord_splits_and_maps_each_part():
    assert keys.chord("ctrl+shift+t") == ["Control_L", "Shift_L", "t"]
    assert keys.chord("cmd+alt+esc") == ["Super_L", "Alt_L", "Escape"]
    assert keys.chord("  ctrl+a  ") == ["Control_L", "a"]


@pytest.mark.parametrize("spec,expected", [
    ("ctrl+shift+T", ["Control_L", "Shift_L", "t"]),
    ("CTRL+A", ["Control_L", "a"]),
    ("shift+A", ["Shift_L", "a"]),
    ("alt+F4", ["Alt_L", "F4"]),  # not a single letter: kept
])
def test_upper_case_letter_in_a_chord_is_lower_cased(spec, expected):
    assert keys.chord(spec) == expected


def test_a_lone_upper_case_letter_stays_upper_case():
    # Without a modifier, "A" means the character A (xdotool types it with shift).
    assert keys.chord("A") == ["A"]


def test_plus_inside_a_chord():
    assert keys.chord("+") == ["plus"]
    assert keys.chord("ctrl++") == ["Control_L", "plus"]
    assert keys.chord("ctrl+plus") == ["Control_L", "plus"]
    assert keys.chord("ctrl+minus") == ["Control_L", "minus"]


def test_sequences_from_a_string_or_a_list():
    assert keys.chords("ctrl+a Delete") == [["Control_L", "a"], ["Delete"]]
    assert keys.chords(["CTRL+L", "enter"]) == [["Control_L", "l"], ["Return"]]
    assert keys.xdotool_chord(["Control_L", "Shift_L", "t"]) == "Control_L+Shift_L+t"


@pytest.mark.parametrize("bad", ["nosuchkey", "ctrlx", "f99", "XF86Fnord", "arrow-left"])
def test_unknown_names_raise_with_the_name_in_the_message(bad):
    with pytest.raises(KeyNameError) as info:
        keys.keysym(bad)
    assert repr(bad) in str(info.value)
    # and the message says what would work
    assert "ctrl" in str(info.value) and "keysym" in str(info.value)


def test_unknown_name_inside_a_chord_is_named():
    with pytest.raises(KeyNameError, match="bogus"):
        keys.chord("ctrl+bogus")


@pytest.mark.parametrize("bad", ["", "   ", "ctrl+", "+ctrl", "ctrl++shift+"])
def test_malformed_chords_are_refused(bad):
    with pytest.raises(KeyNameError):
        keys.chord(bad)


def test_empty_sequences_are_refused():
    with pytest.raises(KeyNameError):
        keys.chords("")
    with pytest.raises(KeyNameError):
        keys.chords([])
    with pytest.raises(KeyNameError):
        keys.keysym("")


def test_key_name_error_is_a_value_error():
    # pydantic turns ValueErrors raised in validators into validation errors (422 at the API).
    assert issubclass(KeyNameError, ValueError)


def test_key_action_validates_every_chord():
    assert Key(keys="ctrl+a Delete").keys == ["ctrl+a", "Delete"]
    with pytest.raises(ValidationError, match="frobnicate"):
        Key(keys=["ctrl+a", "frobnicate"])
    with pytest.raises(ValidationError, match="bogus"):
        HoldKey(keys="shift+bogus")
    assert HoldKey(keys="shift").keys == "shift"
