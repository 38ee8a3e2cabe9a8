"""The Load bench's arithmetic of what the cores allow (tests/bench_load.cpu_bound), without X."""

from tests.bench_load import cpu_bound


def _result(times: dict[str, list[float]], cpu: dict[str, float], share: float) -> dict:
    return {"times": times, "cpu_ms_per_answer": cpu, "cpu_share": share}


def test_the_floor_is_clients_times_cpu_per_answer_over_the_cores():
    results = {
        (1, 1): _result({"click": [90.0, 110.0]}, {"server": 20.0, "chromium": 40.0}, 0.3),
        (4, 2): _result({"click": [300.0, 340.0], "screenshot": [20.0, 20.0]}, {"server": 25.0, "chromium": 37.5},
                        0.8),
    }
    said = cpu_bound(results, (4, 2), cores=2)
    # 8 clients x 62.5 ms / 2 cores = 250 ms; alone the mean is 100 ms; measured 170 ms.
    assert "cost 62.5 ms of CPU" in said
    assert "less than 250 ms on average" in said and "2.50x the mean alone, 100 ms" in said
    assert "measured: 170 ms (1.70x)" in said and "80 % busy" in said
    # 1.5 x 100 ms x 2 cores / 8 clients
    assert said.endswith("at most 37.5 ms of CPU an answer.")
