"""The conformance runner's verdicts (run_conformance.judge), without running the suite."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conformance.run_conformance import (
    ALPHA_NO_SKIPS,
    AUTHORIZATION_EXPECTED_FAILURES,
    WSGI_EXPECTED_FAILURES,
    ScenarioResult,
    excuse_held_streams,
    judge,
    read_results,
)

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


STATELESS = "server-stateless"
LISTEN_CHECK = "sep-2575-server-sends-subscription-ack"


def _stateless(**statuses: str) -> ScenarioResult:
    result = ScenarioResult(STATELESS, {"SUCCESS": 25})
    for check, status in statuses.items():
        result.counts[status] = result.counts.get(status, 0) + 1
        result.statuses[check] = status
        if status != "SUCCESS":
            result.notes.append(f"{status} {check}: no listen")
    return result


def test_under_wsgi_a_listed_held_stream_check_may_fail() -> None:
    results = {STATELESS: _stateless(**{LISTEN_CHECK: "FAILURE"})}

    excused = excuse_held_streams(results, {STATELESS: {LISTEN_CHECK: "needs a held stream"}})
    problems, lines = judge(results, [STATELESS], {})

    assert excused == [] and problems == []
    assert "1 expected to fail under WSGI" in "\n".join(lines)


def test_under_wsgi_another_failing_check_of_the_same_scenario_still_fails_the_run() -> None:
    results = {STATELESS: _stateless(**{LISTEN_CHECK: "FAILURE", "sep-2575-meta": "FAILURE"})}

    excuse_held_streams(results, {STATELESS: {LISTEN_CHECK: "needs a held stream"}})
    problems, _ = judge(results, [STATELESS], {})

    assert problems == [f"{STATELESS}: failed"]


def test_under_wsgi_a_listed_check_that_passes_fails_the_run() -> None:
    results = {STATELESS: _stateless(**{LISTEN_CHECK: "SUCCESS"})}

    excused = excuse_held_streams(results, {STATELESS: {LISTEN_CHECK: "needs a held stream"}})

    assert len(excused) == 1 and "remove it from WSGI_EXPECTED_FAILURES" in excused[0]


def test_every_check_expected_to_fail_under_wsgi_needs_a_held_stream() -> None:
    reasons = [
        reason
        for checks in WSGI_EXPECTED_FAILURES.values()
        for by_check in checks.values()
        for reason in by_check.values()
    ]
    assert reasons and all("held open" in r or "holds a stream open" in r for r in reasons)


GRANT = "authorization-code-grant"
METADATA = "authorization-server-metadata-endpoint"


def _authorization_results(tmp_path: Path, grant_status: str) -> Path:
    """Result folders as `conformance authorization -o` writes them (alpha.12's names)."""
    checks = {
        METADATA: [
            {"id": "authorization-server-metadata", "status": "SUCCESS"},
            {"id": "authorization-server-metadata-cimd", "status": "SUCCESS"},
        ],
        GRANT: [
            {
                "id": GRANT,
                "status": grant_status,
                "errorMessage": "authorization-code-grant requires --client-id",
            }
        ],
    }
    for name, entries in checks.items():
        folder = tmp_path / f"authorization-server-{name}-2026-11-29T10-09-10-964Z"
        folder.mkdir()
        (folder / "checks.json").write_text(json.dumps(entries))
    return tmp_path


def test_the_authorization_scenarios_are_read_by_their_names(tmp_path: Path) -> None:
    results = read_results(_authorization_results(tmp_path, "SUCCESS"))

    assert sorted(results) == [GRANT, METADATA]
    problems, _ = judge(
        results,
        [METADATA, GRANT],
        AUTHORIZATION_EXPECTED_FAILURES,
        no_skips={METADATA: frozenset(), GRANT: frozenset()},
    )
    assert problems == []


def test_a_skipped_authorization_code_grant_fails_the_run(tmp_path: Path) -> None:
    # What the suite writes when it cannot run the grant (no client id, no usable client
    # authentication method): nothing failed, nothing proven.
    results = read_results(_authorization_results(tmp_path, "SKIPPED"))

    problems, _ = judge(
        results,
        [METADATA, GRANT],
        AUTHORIZATION_EXPECTED_FAILURES,
        no_skips={METADATA: frozenset(), GRANT: frozenset()},
    )
    assert problems == [f"{GRANT}: checks skipped where every one must run: {GRANT}"]
