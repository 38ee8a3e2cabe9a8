"""Where the suite's time went, from the JUnit reports `make test` writes (python -m tests.durations
REPORT...): per tier, the tests, their summed time and the slowest file; then the slowest tests.

Summed time is each test's own (setup, call and teardown as JUnit counts them); in the parallel
part several run at once, so a tier's sum is more than the wall time it took. The wall time of
each part is printed by `make test` itself."""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

TIERS = ("unit", "protocol", "integration", "e2e", "docker")


@dataclass(frozen=True)
class Case:
    name: str  # the test's node id, tests/<tier>/<file>.py::<test>
    seconds: float
    outcome: str  # passed, failed, error, skipped

    @property
    def tier(self) -> str:
        parts = self.name.split("/")
        return parts[1] if len(parts) > 2 and parts[1] in TIERS else "other"

    @property
    def file(self) -> str:
        return self.name.split("::")[0]


def node_id(classname: str, name: str) -> str:
    """JUnit's classname (tests.unit.test_x, or tests.unit.test_x.TestClass) back to pytest's node id."""
    parts = classname.split(".")
    cut = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
    return "/".join(parts[:cut + 1]) + ".py::" + "::".join([*parts[cut + 1:], name])


def read(report: Path) -> list[Case]:
    cases = []
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome = next((tag for tag in ("failure", "error", "skipped") if case.find(tag) is not None), "passed")
        cases.append(Case(node_id(case.get("classname", ""), case.get("name", "")), float(case.get("time") or 0),
                          outcome))
    return cases


def summary(cases: list[Case], slowest: int = 30) -> str:
    lines = [f"{'tier':<12} {'tests':>6} {'summed s':>9}  slowest file"]
    by_tier: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        by_tier[case.tier].append(case)
    for tier in [*TIERS, "other"]:
        if tier not in by_tier:
            continue
        files: dict[str, float] = defaultdict(float)
        for case in by_tier[tier]:
            files[case.file] += case.seconds
        worst = max(files, key=files.__getitem__)
        lines.append(f"{tier:<12} {len(by_tier[tier]):>6} {sum(files.values()):>9.1f}  {worst} ({files[worst]:.1f} s)")
    lines.append(f"\nthe {slowest} slowest tests:")
    for case in sorted(cases, key=lambda c: c.seconds, reverse=True)[:slowest]:
        outcome = "" if case.outcome == "passed" else f"  [{case.outcome}]"
        lines.append(f"{case.seconds:8.1f} s  {case.name}{outcome}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--slowest", type=int, default=30)
    args = parser.parse_args(argv)
    cases = [case for report in args.reports if report.exists() for case in read(report)]
    if not cases:
        print("no test durations: no JUnit report was written", file=sys.stderr)
        return 0
    print(summary(cases, args.slowest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
