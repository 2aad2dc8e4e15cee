"""The conformance runner's verdicts (run_conformance.judge), without running the suite."""

from __future__ import annotations

from tests.conformance.run_conformance import ALPHA_NO_SKIPS, ScenarioResult, judge

SKILLS = "sep-2640-skills-enumeration"


def _result(skipped: list[str], success: int = 3) -> ScenarioResult:
    return ScenarioResult(
        SKILLS,
        {"SUCCESS": success, "SKIPPED": len(skipped)},
        [f"SKIPPED {i}: n/a" for i in skipped],
        skipped,
    )


def test_a_skills_scenario_with_a_skipped_check_fails_the_run() -> None:
    # What a server that does not declare the extension gets: every check SKIPPED, nothing failed.
    problems, lines = judge(
        {SKILLS: _result(["sep-2640-entry-uri-required"])},
        [SKILLS],
        {},
        {},
        ALPHA_NO_SKIPS["2026-07-28"],
    )
    assert problems == [
        f"{SKILLS}: checks skipped where every one must run: sep-2640-entry-uri-required"
    ]
    assert "SKIPPED CHECKS" in "\n".join(lines)


def test_the_checks_a_revision_does_not_define_may_skip_there_only() -> None:
    cache = ["sep-2640-skills-list-cache-attributes", "sep-2640-skills-get-cache-attributes"]
    assert judge({SKILLS: _result(cache)}, [SKILLS], {}, {}, ALPHA_NO_SKIPS["2025-11-25"])[0] == []
    assert judge({SKILLS: _result(cache)}, [SKILLS], {}, {}, ALPHA_NO_SKIPS["2026-07-28"])[0] != []


def test_a_missing_skills_scenario_fails_the_run() -> None:
    problems, _ = judge({}, [SKILLS], {}, {}, ALPHA_NO_SKIPS["2026-07-28"])
    assert problems == [f"{SKILLS}: no results (the scenario did not run or crashed)"]
