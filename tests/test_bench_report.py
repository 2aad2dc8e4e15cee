"""bench/report.py judges issue 27's targets from a run's figures: pure functions on a small
figures dict, no server started."""

from __future__ import annotations

from bench import report
from bench.servers import (
    FLOOR,
    FLOOR_DAPHNE,
    FLOOR_GUNICORN,
    GUNICORN_GTHREAD,
    GUNICORN_SYNC,
    OPS_OFF,
    OPS_OFF_DAPHNE,
    OPS_OFF_GUNICORN,
    PEER,
    REFERENCE,
)

SMOKE = {
    "rounds": 1,
    "duration": 1,
    "warmup": 0,
    "setup_duration": 1,
    "notify_duration": 1,
    "notify_count": 10,
}


def _case(per_core: float, p99: float) -> dict:
    return {
        "calls_per_s": per_core,
        "calls_per_core_s": per_core,
        "p50_ms": p99 / 2,
        "p99_ms": p99,
        "cpu": {"other_cores": 0.0},
    }


def _run(cases: dict, servers: list[str]) -> dict:
    """A results JSON as bench/run.py writes it, with only tools/call JSON at c=8."""
    return {
        "date": "2026-11-26 00:00 UTC",
        "command": ".venv/bin/python bench/run.py --smoke",
        "profile_name": "smoke",
        "profile": {
            **SMOKE,
            "notify_concurrency": [],
            "memory_counts": [],
            "open_windows": [],
            "concurrencies": [8],
        },
        "servers": servers,
        "machine": {
            "cpu": "test",
            "cores": 2,
            "memory_gib": 1.0,
            "kernel": "6",
            "python": "3.11",
            "packages": {},
            "wrk": "wrk",
        },
        "ours_source_at_start": {
            "git_head": "abc",
            "uncommitted_changes": False,
            "sha256_of_py_sources": "0",
            "newest_source_change": "now",
        },
        "ours_source_at_end": {
            "git_head": "abc",
            "uncommitted_changes": False,
            "sha256_of_py_sources": "0",
            "newest_source_change": "now",
        },
        "wall_seconds": 60,
        "cases": {f"{kind}.json.tools_call.c8": value for kind, value in cases.items()},
        "results_file": "test.json",
    }


def _cell(summary: dict, metric: str, kind: str) -> dict:
    row = next(r for r in summary["rows"] if r["case"] == "json, c=8" and r["metric"] == metric)
    return row["ours"][kind]


def test_daphne_json_throughput_and_p99_are_judged_against_the_floor_on_daphne() -> None:
    cases = {
        REFERENCE: _case(1000, 5.0),
        "ours-uvicorn": _case(2600, 4.0),
        "ours-daphne": _case(1300, 12.0),
        FLOOR_DAPHNE: _case(2000, 10.0),
    }
    summary = report.summarize(
        _run(cases, ["ours-uvicorn", "ours-daphne", REFERENCE, FLOOR_DAPHNE])
    )

    throughput = _cell(summary, "calls_per_core_s", "ours-daphne")
    assert (throughput["checked"], throughput["meets"], throughput["floor"]) == (0.65, True, 2000)
    p99 = _cell(summary, "p99_ms", "ours-daphne")
    assert (p99["checked"], p99["meets"], p99["miss_pct"]) == (1.2, False, 20.0)
    # uvicorn's are against the SDK: 2.6x its throughput, 0.8 of its p99.
    assert _cell(summary, "calls_per_core_s", "ours-uvicorn")["meets"] is True
    assert _cell(summary, "p99_ms", "ours-uvicorn")["meets"] is True
    assert [(m["kind"], m["metric"]) for m in summary["misses"]] == [("ours-daphne", "p99_ms")]


def test_a_run_without_floors_leaves_daphne_unjudged_and_says_not_measured() -> None:
    cases = {REFERENCE: _case(1000, 5.0), "ours-daphne": _case(1300, 12.0)}
    rep = _run(cases, ["ours-daphne", REFERENCE])
    rep["summary"] = report.summarize(rep)

    cell = _cell(rep["summary"], "calls_per_core_s", "ours-daphne")
    assert (cell["meets"], cell["unjudged"]) == (None, "floor not measured")
    markdown = report.render_markdown(rep)
    assert "daphne ≥ 0.65× its floor: floor not measured" in markdown  # noqa: RUF001
    assert "| daphne | `floor-daphne` | calls per server core-s | not measured |" in markdown
    assert f"Not measured in this run ({OPS_OFF} did not run)." in markdown


def test_the_operations_layer_costing_more_than_15_percent_of_a_json_call_is_a_missed_target() -> (
    None
):
    cases = {"ours-uvicorn": _case(3400, 4.0), OPS_OFF: _case(4250, 3.0)}
    rep = _run(cases, ["ours-uvicorn", OPS_OFF])
    rep["summary"] = report.summarize(rep)

    (row,) = rep["summary"]["operations"]
    assert (row["ratio"], row["meets"], row["miss_pct"]) == (0.8, False, 5.9)
    assert report.operations_cost(rep["cases"]) == {"json.tools_call.c8": 0.8}
    assert [m["section"] for m in rep["summary"]["misses"]] == ["operations layer"]
    assert (
        "| json, c=8 | 3,400 | 4,250 | 0.80 | ≥ 0.85×: misses by 6 % |"
        in report.render_markdown(rep)
    )  # noqa: RUF001


def test_judge_says_which_figure_is_missing() -> None:
    on_floor = report.Target("ge", 0.65, on="floor")
    assert report.judge(on_floor, 1300, floor=2000)["meets"] is True
    assert report.judge(on_floor, 1300)["unjudged"] == "floor not measured"
    assert report.judge(on_floor, None, floor=2000)["unjudged"] == "no figure"
    assert (
        report.judge(report.OPERATIONS, 3400, against=OPS_OFF)["unjudged"]
        == f"{OPS_OFF} not measured"
    )


def test_stream_open_growth_is_judged_against_the_companion_s_opens_at_the_same_moments() -> None:
    from bench.streams import open_growth

    early = {"open_median_ms": 2.0, "get_median_ms": 1.0}
    # The machine ran slower during the late window: opens 1.5x as slow on both servers, no growth.
    late = {
        "open_median_ms": 3.0,
        "get_median_ms": 1.5,
        "companion_open_median_ms": 3.0,
        "companion_get_median_ms": 1.2,
    }
    assert open_growth(early, late) == {
        "raw_growth": 1.5,
        "growth": 1.0,
        "raw_get_growth": 1.5,
        "get_growth": 1.25,
    }
    # A run without a companion (it did not start) is judged on the one server.
    alone = {"open_median_ms": 3.0, "get_median_ms": 1.5}
    assert open_growth(early, alone)["growth"] == 1.5


def _modern_case(per_core: float, p99: float, cpu_us: float) -> dict:
    return {**_case(per_core, p99), "server_cpu_us_per_call": cpu_us}


def _modern_row(summary: dict, label: str) -> dict:
    return next(r for r in summary["modern"]["comparisons"] if r["label"] == label)


def test_modern_calls_are_judged_against_the_peer_the_opsoff_twins_and_the_floors() -> None:
    figures = {
        "ours-uvicorn": _modern_case(4000, 2.0, 250),
        "ours-daphne": _modern_case(1800, 2.5, 550),
        PEER: _modern_case(2000, 2.0, 500),
        GUNICORN_SYNC: _modern_case(2200, 1.5, 455),
        GUNICORN_GTHREAD: _modern_case(1900, 1.9, 526),
        OPS_OFF: _modern_case(4400, 1.8, 227),
        OPS_OFF_DAPHNE: _modern_case(2400, 2.2, 416),
        FLOOR: _modern_case(20000, 0.5, 50),
        FLOOR_DAPHNE: _modern_case(4000, 1.0, 250),
    }
    rep = _run({}, [])
    rep["cases"] = {f"{kind}.json.modern_call.c8": v for kind, v in figures.items()}
    rep["profile"]["concurrencies"] = [1, 8]
    rep["cases"].update({f"{kind}.json.modern_call.c1": v for kind, v in figures.items()})
    rep["summary"] = report.summarize(rep)

    summary = rep["summary"]
    daphne = _modern_row(summary, f"ours-daphne / {PEER}, calls per server core-s")["cells"][8]
    assert (daphne["checked"], daphne["meets"], daphne["miss_pct"]) == (0.9, False, 10.0)
    uvicorn = _modern_row(summary, f"ours-uvicorn / {PEER}, calls per server core-s")["cells"][8]
    assert uvicorn["meets"] is True
    p99 = _modern_row(summary, f"ours-daphne / {PEER}, p99")["cells"]
    assert (p99[1]["meets"], p99[1]["miss_pct"], p99[8]["meets"]) == (False, 4.2, None)
    ops = f"ours-daphne / {OPS_OFF_DAPHNE} (operations layer), calls per server core-s"
    assert _modern_row(summary, ops)["cells"][8]["checked"] == 0.75
    # 550 - 250 = 300 µs above the floor on Daphne, 250 - 50 = 200 on uvicorn: 1.5, just met.
    floors = _modern_row(summary, "ours-daphne's CPU above its floor / ours-uvicorn's")["cells"][8]
    assert (floors["checked"], floors["meets"]) == (1.5, True)
    # Issue 46: the plain view under gunicorn's sync worker against the peer on the same; the
    # gthread row is shown, unjudged.
    wsgi = _modern_row(summary, f"{GUNICORN_SYNC} / {PEER}, calls per server core-s")["cells"]
    assert (wsgi[8]["checked"], wsgi[8]["meets"]) == (1.1, True)
    gthread = _modern_row(summary, f"{GUNICORN_GTHREAD} / {PEER}, calls per server core-s")
    assert (gthread["target"], gthread["cells"][8]["checked"]) == (None, 0.95)
    markdown = report.render_markdown(rep)
    assert "| 8 | peer | 2,000 | 2,000 | 500 | 2.00 |" in markdown
    assert "| ours-daphne / peer, calls per server core-s | 0.90× (misses by 10 %) |" in markdown  # noqa: RUF001


def test_a_run_without_the_modern_case_says_it_was_not_measured() -> None:
    rep = _run({REFERENCE: _case(1000, 5.0)}, [REFERENCE])
    rep["summary"] = report.summarize(rep)

    assert not rep["summary"]["modern"]["measured"]
    assert rep["summary"]["misses"] == []
    assert "Not measured in this run (`bench/run.py --cases modern`)." in report.render_markdown(
        rep
    )


def test_the_plain_view_under_gunicorn_is_shown_against_its_floor_and_its_opsoff_twin() -> None:
    figures = {
        PEER: _modern_case(2000, 2.0, 500),
        GUNICORN_SYNC: _modern_case(1600, 2.4, 625),
        OPS_OFF_GUNICORN: _modern_case(1750, 2.2, 571),
        FLOOR_GUNICORN: _modern_case(2500, 1.6, 400),
    }
    rep = _run({}, [])
    rep["cases"] = {f"{kind}.json.modern_call.c8": v for kind, v in figures.items()}
    rep["summary"] = report.summarize(rep)

    summary = rep["summary"]
    # 625 - 400 µs: what mcp_django adds to Django and gunicorn's sync worker.
    above = _modern_row(summary, f"{GUNICORN_SYNC} above {FLOOR_GUNICORN}, server CPU µs per call")
    assert (above["target"], above["cells"][8]["checked"]) == (None, 225.0)
    # Django alone against the peer, and the operations layer under WSGI: shown, not judged.
    floor = _modern_row(summary, f"{FLOOR_GUNICORN} / {PEER}, calls per server core-s")
    assert (floor["target"], floor["cells"][8]["checked"]) == (None, 1.25)
    ops = _modern_row(
        summary,
        f"{GUNICORN_SYNC} / {OPS_OFF_GUNICORN} (operations layer), calls per server core-s",
    )
    assert (ops["target"], ops["cells"][8]["checked"], ops["cells"][8]["meets"]) == (
        None,
        0.914,
        None,
    )
    # Issue 46's target is unchanged: ours-gunicorn / peer 0.8 misses by 20 %, the only miss.
    assert [(m["kind"], m["figure"], m["miss_pct"]) for m in summary["misses"]] == [
        (GUNICORN_SYNC, 0.8, 20.0)
    ]
    markdown = report.render_markdown(rep)
    assert "| 8 | floor-gunicorn | 2,500 | 2,500 | 400 | 1.60 |" in markdown
    assert "| ours-gunicorn above floor-gunicorn, server CPU µs per call | 225 |  |" in markdown
    assert "| floor-gunicorn / peer, calls per server core-s | 1.25× |  |" in markdown  # noqa: RUF001
    assert (
        "| ours-gunicorn / ours-gunicorn-opsoff (operations layer), calls per server core-s "
        "| 0.91× |  |" in markdown  # noqa: RUF001
    )
    # A run without them says so in the same rows, unjudged.
    del rep["cases"][f"{FLOOR_GUNICORN}.json.modern_call.c8"]
    rep["summary"] = report.summarize(rep)
    above = _modern_row(
        rep["summary"], f"{GUNICORN_SYNC} above {FLOOR_GUNICORN}, server CPU µs per call"
    )
    assert above["cells"][8]["checked"] is None
