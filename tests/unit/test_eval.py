"""Evaluations without a desktop: the rates a scripted pair of agents must give, false claims,
environment faults retried apart, the interval and test, task files, JUnit, MiniWoB++'s pages
and the oracle's reading of instructions (vision.eval)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import pytest

from tests.fakes.episodes import FakeEpisodes
from vision.eval import miniwob
from vision.eval.episodes import EnvironmentFault, FlowEpisodes
from vision.eval.results import EvalResult, junit, summarise
from vision.eval.runner import EpisodeContext, Evaluation
from vision.eval.stats import drop_p_value, fell_beyond_chance, wilson
from vision.eval.tasks import TaskError, TaskSet, parse_tasks

CHECK = [{"selector": "#done", "assertion": {"type": "visible"}}]


def task_set(*ids: str) -> TaskSet:
    return parse_tasks([{"id": i, "instruction": f"do {i}", "expect": CHECK} for i in ids], "tasks.yaml")


@dataclass
class Scripted:
    """An agent whose episodes go as ``right(episode)`` says; ``quiet``: never says done."""

    name: str
    right: object
    quiet: bool = False

    def request(self, context: EpisodeContext) -> dict:
        word = "right" if self.right(context.episode) else "wrong"
        return {"model": "scripted", "script": [word] + (["quiet"] if self.quiet else [])}


def evaluate(episodes, tasks, agents, **options) -> EvalResult:
    evaluation = Evaluation(episodes, tasks, agents, **options)
    result = EvalResult(eval_id="e1", name=tasks.name, started_at="-", models=[a.name for a in agents],
                        tasks=[t.id for t in tasks.tasks], episodes_per_task=evaluation.episodes_per_task,
                        parallel=evaluation.parallel)
    return summarise(result.model_copy(update={"episodes": evaluation.run()}))


def test_two_scripted_models_get_exactly_the_rates_their_scripts_imply():
    fake = FakeEpisodes(together=3)
    always, odd = Scripted("always", lambda n: True), Scripted("odd", lambda n: n % 2 == 1)
    result = evaluate(fake, task_set("a", "b", "c"), [always, odd], episodes_per_task=5, parallel=3)
    assert len(result.episodes) == 30 and fake.opened == 30 and fake.closed == set(fake.sessions)
    assert fake.most_at_once == 3  # K at a time, never more
    for task in ("a", "b", "c"):
        assert (result.rate("always", task).successes, result.rate("always", task).episodes) == (5, 5)
        assert (result.rate("odd", task).successes, result.rate("odd", task).episodes) == (3, 5)
        # the failing episodes said done: each a false claim
        assert result.rate("odd", task).false_claims == 2 and result.rate("always", task).false_claims == 0
    everything = result.rate("odd")
    assert (everything.successes, everything.episodes, everything.rate) == (9, 15, 0.6)
    assert everything.ci95 == pytest.approx(wilson(9, 15))
    assert everything.tokens == 15 * 110 and everything.mean_steps == 2


@pytest.mark.parametrize("fresh", ["reset", "clear"])
def test_a_worker_keeps_its_desktop_made_clean_between_episodes_and_drops_a_spoiled_one(fresh):
    fake = FakeEpisodes(die_in_run={("a", 2): 1}, together=2)  # both workers busy from the start
    result = evaluate(fake, task_set("a", "b"), [Scripted("odd", lambda n: n % 2 == 1)], episodes_per_task=4,
                      parallel=2, fresh=fresh)
    assert [e.outcome for e in result.episodes if e.task == "b"] == ["success", "failure"] * 2  # no carry-over
    assert fake.opened == 2 + 1  # one desktop per worker, and one for the spoiled one's retry
    assert fake.recycled == 8 + 1 - fake.opened
    assert fake.closed == set(fake.sessions)  # every desktop ended with the evaluation


def test_a_task_that_starts_logged_in_gets_a_new_desktop_from_its_state_each_episode():
    tasks = parse_tasks([{"id": "shop", "instruction": "buy", "start": {"state": "alice"}, "expect": CHECK},
                         {"id": "plain", "instruction": "look", "expect": CHECK}], "x")
    fake = FakeEpisodes()
    result = evaluate(fake, tasks, [Scripted("m", lambda n: True)], episodes_per_task=3, fresh="clear")
    assert all(e.outcome == "success" for e in result.episodes)
    assert sorted(str(d["state"]) for d in fake.sessions.values()) == ["None", "alice", "alice", "alice"]


def test_an_episode_is_the_check_not_the_claim():
    """A model that never says done but left the desktop right succeeded; one that says done on a
    wrong desktop failed, and its claim is counted false."""
    result = evaluate(FakeEpisodes(), task_set("a"), [Scripted("silent", lambda n: True, quiet=True),
                                                      Scripted("boaster", lambda n: False)], episodes_per_task=2)
    silent = [e for e in result.episodes if e.model == "silent"]
    assert all(e.outcome == "success" and not e.claimed and e.status == "max_steps" for e in silent)
    boaster = [e for e in result.episodes if e.model == "boaster"]
    assert all(e.outcome == "failure" and e.claimed and e.false_claim for e in boaster)
    assert result.rate("boaster").false_claims == 2 and result.rate("silent").false_claims == 0


def test_a_session_that_dies_mid_run_is_retried_on_a_fresh_one_and_counted_apart():
    fake = FakeEpisodes(die_in_run={("a", 2): 1, ("b", 1): 5})
    result = evaluate(fake, task_set("a", "b"), [Scripted("always", lambda n: True)], episodes_per_task=2, retries=2)
    a2 = next(e for e in result.episodes if (e.task, e.episode) == ("a", 2))
    assert a2.outcome == "success" and len(a2.environment_errors) == 1
    assert "session_unavailable" in a2.environment_errors[0]
    b1 = next(e for e in result.episodes if (e.task, e.episode) == ("b", 1))
    assert b1.outcome == "environment_error" and len(b1.environment_errors) == 3  # every attempt spoiled
    a, b = result.rate("always", "a"), result.rate("always", "b")
    assert (a.successes, a.episodes, a.retried, a.environment_errors) == (2, 2, 1, 0)
    # never a failure of the model: left out of the rate, counted apart
    assert (b.successes, b.episodes, b.environment_errors) == (1, 1, 1)
    assert fake.opened == 2 + 1 + 2 + 2  # each attempt on a desktop of its own


def test_a_setup_that_fails_is_the_environment_and_an_agent_that_cannot_start_is_a_failure():
    class Broken:
        name = "broken"

        def request(self, context):
            raise RuntimeError("no solution on this page")

    class Garbled:
        name = "garbled"

        def request(self, context):
            return {"model": "scripted", "script": ["unparseable"]}

    result = evaluate(FakeEpisodes(), task_set("a"), [Garbled()], retries=2)
    (refused,) = result.episodes  # a run refused as asked is the agent's failure, tried once
    assert refused.outcome == "failure" and refused.error["code"] == "invalid_request"
    assert not refused.environment_errors
    result = evaluate(FakeEpisodes(setup_fails={"b"}), task_set("a", "b"), [Broken()], retries=1)
    a = next(e for e in result.episodes if e.task == "a")
    assert a.outcome == "failure" and a.error["code"] == "agent_failed" and "no solution" in a.error["message"]
    b = next(e for e in result.episodes if e.task == "b")
    assert b.outcome == "environment_error" and "setup_failed" in b.environment_errors[0]


def test_bad_options_are_refused_all_at_once():
    with pytest.raises(ValueError) as refused:
        Evaluation(FakeEpisodes(), task_set("a"), [Scripted("x", bool), Scripted("x", bool)], episodes_per_task=0,
                   parallel=99, retries=-1, fresh="sometimes")
    for part in ("episodes", "parallel", "retries", "each once", "fresh"):
        assert part in str(refused.value)


@pytest.mark.parametrize(("successes", "n", "low", "high"), [
    (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (3, 5, 0.2307, 0.8824), (81, 263, 0.2553, 0.3662)])
def test_wilson_intervals_match_published_values(successes, n, low, high):
    assert wilson(successes, n) == pytest.approx((low, high), abs=5e-4)


def test_a_drop_is_flagged_only_beyond_chance():
    # Fisher's exact test, one-sided: 10/10 then 5/10 is p = 252/15504
    assert drop_p_value(10, 10, 5, 10) == pytest.approx(252 / 15504)
    assert fell_beyond_chance(10, 10, 5, 10)
    assert not fell_beyond_chance(5, 5, 4, 5)  # one miss in five: chance
    assert not fell_beyond_chance(5, 10, 10, 10)  # a rise is never a fall
    with pytest.raises(ValueError):
        wilson(6, 5)


def test_a_baseline_comparison_flags_the_task_that_fell():
    tasks = task_set("steady", "broken")
    before = evaluate(FakeEpisodes(), tasks, [Scripted("m", lambda n: True)], episodes_per_task=8)
    evaluation = Evaluation(FakeEpisodes(), tasks, [BrokenOn("m", "broken")], episodes_per_task=8)
    after = summarise(before.model_copy(update={"eval_id": "e2", "episodes": evaluation.run()}), before)
    assert after.rate("m", "broken").fell is True and after.rate("m", "broken").baseline_rate == 1.0
    assert after.rate("m", "steady").fell is False and after.baseline == "e1"


@dataclass
class BrokenOn:
    name: str
    task: str

    def request(self, context):
        return {"script": ["wrong" if context.task.id == self.task else "right"]}


def test_junit_has_a_case_per_task_and_model_with_its_episodes():
    tasks = task_set("a", "b")
    result = evaluate(FakeEpisodes(die_in_run={("b", 1): 9}), tasks,
                      [Scripted("one", lambda n: True), Scripted("two", lambda n: False)], retries=0)
    root = ET.fromstring(junit(result))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["tasks.yaml on one", "tasks.yaml on two"]
    one = {c.get("name"): c for c in suites[0].findall("testcase")}
    assert one["a"].find("failure") is None and one["b"].find("error") is not None
    two = {c.get("name"): c for c in suites[1].findall("testcase")}
    assert "1 of 1 episodes failed" in two["a"].find("failure").get("message")
    assert "a false claim" in two["a"].find("failure").text
    assert suites[1].get("failures") == "1"


def test_a_task_file_lists_every_problem_at_once():
    with pytest.raises(TaskError) as refused:
        parse_tasks({"name": "x", "tasks": [
            {"id": "bad id", "instruction": "x", "expect": CHECK},
            {"id": "both", "instruction": "x", "instruction_from": "#q", "expect": CHECK},
            {"id": "unchecked", "instruction": "x"},
            {"id": "typo", "instruction": "x", "expect": CHECK, "max_step": 3}], "extra": 1}, "x.yaml")
    lines = str(refused.value).splitlines()
    assert len(lines) == 5
    assert "unknown key(s) extra" in lines[0]
    assert "task 1 (bad id): id" in lines[1] and "task 2 (both): give one of" in lines[2]
    assert "task 3 (unchecked): expect" in lines[3] and "task 4 (typo): max_step" in lines[4]
    with pytest.raises(TaskError, match="given more than once"):
        parse_tasks([{"id": "a", "instruction": "x", "expect": CHECK}] * 2, "x.yaml")


def test_a_start_url_takes_the_episode_number():
    task = parse_tasks([{"id": "a", "instruction": "x", "expect": CHECK,
                         "start": {"url": "http://127.0.0.1:1/t.html?seed={episode}"}}], "x").tasks[0]
    assert task.start_url(7) == "http://127.0.0.1:1/t.html?seed=7"


def test_miniwob_pages_get_the_shim_after_the_core_and_only_task_pages_are_taken():
    page = '<head><script src="../core/core.js"></script><script>var x;</script>'
    shimmed = miniwob.with_shim(page)
    assert shimmed.index("core.js") < shimmed.index("Math.seedrandom") < shimmed.index("var x")
    with pytest.raises(ValueError, match="not a MiniWoB"):
        miniwob.with_shim("<html></html>")
    available = ["click-button", "enter-text", "login-user", "some-canvas-task"]
    assert miniwob.parse_spec("miniwob:all", available) == available
    assert miniwob.parse_spec("miniwob:oracle", available) == ["click-button", "enter-text", "login-user"]
    with pytest.raises(TaskError, match="no such MiniWoB.*clik-button, nope"):
        miniwob.parse_spec("miniwob:clik-button,nope", available)
    tasks = miniwob.tasks("miniwob:enter-text", "http://127.0.0.1:9", available=available, budget_seconds=60)
    (task,) = tasks.tasks
    assert task.start_url(3) == "http://127.0.0.1:9/miniwob/enter-text.html?seed=3&max_time=60000"
    assert task.instruction_from == "#query" and task.setup[0].selector == "#sync-task-cover"


def test_the_result_table_in_a_log_has_every_figure_whole(capsys):
    """Not a terminal (CI's log, a file): rich fits a table to 80 columns and cuts figures to "0…"."""
    from vision.cli import eval as eval_cli

    tasks = task_set(*(f"a-task-with-a-long-name-{i}" for i in range(3)))
    result = evaluate(FakeEpisodes(together=2), tasks, [Scripted("provider/a-long-model-name", lambda n: n == 1)],
                      episodes_per_task=2, parallel=2)
    eval_cli.print_table(result)
    printed = capsys.readouterr().err
    assert "…" not in printed and "50%" in printed and "a-task-with-a-long-name-2" in printed


def test_a_long_list_of_miniwob_tasks_is_one_set_with_a_name_in_bounds():
    available = [f"task-number-{i:03d}" for i in range(40)]
    spec = "miniwob:" + ",".join(available)
    tasks = miniwob.tasks(spec, "http://127.0.0.1:9", available=available)
    assert [t.id for t in tasks.tasks] == available
    assert tasks.name == "miniwob:task-number-000 and 39 other tasks"
    assert miniwob.tasks("miniwob:task-number-001", "http://127.0.0.1:9", available=available).name == \
        "miniwob:task-number-001"


def test_the_package_ships_the_pages_the_oracle_covers():
    names = miniwob.task_names()
    assert len(names) >= 100 and set(miniwob.SOLVERS) <= set(names)


@pytest.mark.parametrize(("task", "instruction", "clicks", "typed"), [
    ("click-checkboxes", "Select nothing and click Submit.", ["#subbtn"], []),
    ("click-checkboxes", "Select 5Ti, qDj and click Submit.",
     ['#area label:text-is("5Ti") input', '#area label:text-is("qDj") input', "#subbtn"], []),
    ("login-user", 'Enter the username "keli" and the password "3hI" into the text fields and press login.',
     ["#username", "#password", "#subbtn"], ["keli", "3hI"]),
    ("enter-text-2", 'Type "BOB" in all lower case letters in the text input and press Submit.',
     ["#tt", "#subbtn"], ["bob"]),
    ("click-dialog-2", 'Click the button in the dialog box labeled "x".', [".ui-dialog-titlebar-close"], []),
    ("click-tab", "Click on Tab #3.", ["#area ul a[href='#tabs-3']"], []),
    ("focus-text-2", "Focus into the 2nd input textbox.", ["#area input >> nth=1"], []),
    ("copy-paste-2", "Copy the text from the 3rd text area below and paste it into the text input, then press Submit.",
     ["#text-3", "#answer-input", "#subbtn"], []),
    ("scroll-text-2", "Scroll the textarea to the top of the text hit submit.", ["#text-area", "#subbtn"], []),
    ("multi-orderings", "Search for horror movies directed by Ruth from year 1983.",
     [f'{miniwob.MOVIE_ROWS}:has-text("Genre") input', f'{miniwob.MOVIE_ROWS}:has-text("Director") input',
      f'{miniwob.MOVIE_ROWS}:not(:has-text("Genre")):not(:has-text("Director")) input',
      "#area :is(button, .final, .ui-submit)"], ["horror", "Ruth", "1983"]),
])
def test_the_oracle_reads_its_solution_off_the_instruction(task, instruction, clicks, typed):
    looked = []

    def look(selector):
        looked.append(selector)
        return {"box": {"x": 100, "y": 200, "width": 10, "height": 20}}

    actions = miniwob.SOLVERS[task](instruction, look)
    assert looked == clicks
    assert [a["text"] for a in actions if a["action"] == "type"] == typed
    assert all(a == {"action": "click", "x": 105, "y": 210} for a in actions if a["action"] == "click")


def test_the_oracle_says_when_it_cannot_read_a_solution():
    for task, instruction in (("click-button", "Click a button."), ("copy-paste-2", "Copy the text."),
                              ("scroll-text-2", "Scroll the textarea."), ("multi-layouts", "Search for movies.")):
        with pytest.raises(miniwob.OracleMiss):
            miniwob.SOLVERS[task](instruction, lambda s: {})


def page(texts: dict[str, str], matches: int = 1):
    """A look at a page whose elements are all at one box, with these texts (by selector)."""
    looked = []

    def look(selector):
        looked.append(selector)
        return {"box": {"x": 100, "y": 200, "width": 10, "height": 20}, "text": texts.get(selector, ""),
                "value": None, "matches": matches}
    return look, looked


@pytest.mark.parametrize(("task", "instruction", "texts", "typed"), [
    ("simple-arithmetic", "Solve the math problem", {"#math-problem": "7 x 3 = "}, ["21"]),
    ("simple-arithmetic", "Solve the math problem", {"#math-problem": "2 - 9 = "}, ["-7"]),
    ("simple-algebra", "Solve for x", {"#math-problem": "x - 4 = 1"}, ["5"]),
    ("simple-algebra", "Solve for x", {"#math-problem": "4 - x = 10"}, ["-6"]),
    ("simple-algebra", "Solve for x", {"#math-problem": "3 + x = 10"}, ["7"]),
    ("find-word", 'Find the 3rd word in the paragraph, type that into the textbox and press "Submit".',
     {"#area p": "Lorem ipsum. dolor, sit"}, ["dolor"]),
    ("read-table", "Enter the value of Year of Birth into the text field and press Submit.",
     {'#tab td:text-is("Year of Birth") + td': " 1961 "}, ["1961"]),
    ("scroll-text", "Find the last word in the text area", {"#text-area": "a b c amet."}, ["amet"]),
    ("enter-date", "Enter 09/27/2016 as the date and hit submit.", {}, ["09272016"]),
    ("enter-time", "Enter 3:05 PM as the time and press submit.", {}, ["0305P"]),
    ("read-table-2", "Enter the value that corresponds with each label into the form and submit when done.",
     {"#ll1": "Color:", "#ll2": "Last name:", '#tab td:text-is("Color") + td': "Red",
      '#tab td:text-is("Last name") + td': " Ng "}, ["Red", "Ng"]),
    ("text-transform", "Type the text below into the text field and press Submit.", {"#captcha": "x 7\nq"}, ["x7q"]),
])
def test_the_oracle_reads_what_the_page_shows(task, instruction, texts, typed):
    look, _ = page(texts)
    actions = miniwob.SOLVERS[task](instruction, look)
    assert [a["text"] for a in actions if a["action"] == "type"] == typed


def test_the_oracle_marks_each_row_and_turns_the_spinner():
    texts = {".row >> nth=0 >> .display-number": "7", ".row >> nth=1 >> .display-number": "-4"}
    look, looked = page(texts, matches=2)
    miniwob.SOLVERS["odd-or-even"]("Mark the numbers", look)
    assert [s for s in looked if "button" in s or s == "#submit"] == [
        ".row >> nth=0 >> button.odd", ".row >> nth=1 >> button.even", "#submit"]
    look, looked = page({})
    actions = miniwob.SOLVERS["use-spinner"]("Select -3 with the spinner and hit Submit.", look)
    assert len(actions) == 4 and ".ui-spinner-down" in looked


def test_a_model_that_cannot_run_here_is_refused_before_any_episode(monkeypatch):
    from vision.config import VisionConfig
    from vision.eval.runner import model_problems

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    problems = model_problems(["ocr", "nope", "anthropic/claude-sonnet-4-5"], VisionConfig())
    assert len(problems) == 2 and "model nope:" in problems[0] and "ANTHROPIC_API_KEY" in problems[1]


class Recorded(FlowEpisodes):
    """FlowEpisodes over primitives that record their calls."""

    UNREACHABLE = (KeyError,)

    def __init__(self):
        self.calls = []

    def _flow(self, session_id, body):
        self.calls.append(("flow", [s.get("action") for s in body["steps"]]))
        return type("Flow", (), {"success": True, "failure_reason": None})()

    def _navigate(self, session_id, url, settle):
        self.calls.append(("navigate", url, "settled" if settle else "loaded"))

    def _click(self, session_id, selector, glide):
        self.calls.append(("click", selector, "gliding" if glide else "at once"))

    def _text(self, session_id, selector):
        if selector == "#gone":
            raise KeyError(selector)
        return "  the\n   instruction "


def test_a_setup_of_clicks_by_selector_runs_as_page_operations_and_any_other_as_a_flow():
    plain = miniwob.tasks("miniwob:click-test", "http://127.0.0.1:9", available=["click-test"]).tasks[0]
    episodes = Recorded()
    assert episodes.prepare("s", plain, 4) == "the instruction"  # its whitespace runs made one space
    # The page answered once loaded: the click after it settles the display the model will see first.
    # It is not the agent's: the pointer goes there at once, without the glide that shows an agent's.
    assert episodes.calls == [("navigate", "http://127.0.0.1:9/miniwob/click-test.html?seed=4&max_time=300000",
                               "loaded"), ("click", "#sync-task-cover", "at once")]
    bare = parse_tasks([{"id": "b", "instruction": "go", "start": {"url": "http://x/"}, "expect": CHECK}], "x").tasks[0]
    episodes = Recorded()
    assert episodes.prepare("s", bare, 1) == "go"
    assert episodes.calls == [("navigate", "http://x/", "settled")]  # nothing after it: the model sees it next
    flowing = parse_tasks([{"id": "a", "instruction": "go", "start": {"url": "http://x/"}, "expect": CHECK,
                            "setup": [{"action": "fill", "selector": "#q", "value": "v"}]}], "x").tasks[0]
    episodes = Recorded()
    assert episodes.prepare("s", flowing, 1) == "go" and episodes.calls == [("flow", ["fill"])]
    gone = plain.model_copy(update={"instruction_from": "#gone"})
    with pytest.raises(EnvironmentFault, match="the setup of click-test"):
        Recorded().prepare("s", gone, 1)
