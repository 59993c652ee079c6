"""`Schedule`: the content of a workspace schedule item, its defaults and what it refuses."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tidemill.flows import Cron, Schedule


def schedule(**fields: Any) -> Schedule:
    return Schedule.model_validate({"cron": "0 6 * * *", "target": "f/reports/daily", **fields})


def test_defaults() -> None:
    item = schedule()
    assert item.timezone == "UTC"
    assert item.inputs == {}
    assert item.enabled is True
    assert item.catch_up == "latest"
    assert item.on_failure is None and item.on_recovery is None
    assert Schedule.CATCH_UP_ALL_LIMIT == 100


def test_every_field_round_trips_through_json() -> None:
    item = schedule(
        cron="*/30 * * * * *",
        timezone="America/New_York",
        target="u/alice/sync",
        inputs={"since": "yesterday", "n": 3},
        enabled=False,
        catch_up="all",
        on_failure="f/ops/page_someone",
        on_recovery="f/ops/all-clear",
    )
    again = Schedule.model_validate_json(item.model_dump_json())
    assert again == item
    assert again.model_dump()["inputs"] == {"since": "yesterday", "n": 3}


def test_cron_schedule_is_the_cron_in_the_zone() -> None:
    item = schedule(cron="30 2 * * *", timezone="Europe/Paris")
    cron = item.cron_schedule()
    assert cron == Cron.parse("30 2 * * *", "Europe/Paris")
    assert cron.next_after(0) == 5400.0  # 02:30 CET on 1970-01-01 is 01:30Z


@pytest.mark.parametrize("policy", ["latest", "all", "skip"])
def test_catch_up_policies(policy: str) -> None:
    assert schedule(catch_up=policy).catch_up == policy


def test_an_unknown_catch_up_policy_is_refused() -> None:
    with pytest.raises(ValidationError) as info:
        schedule(catch_up="everything")
    assert info.value.errors()[0]["loc"] == ("catch_up",)


@pytest.mark.parametrize(
    ("cron", "words"),
    [
        ("0 25 * * *", "hour: '25' is out of range"),
        ("* * * *", "5 or 6 fields"),
        ("@sometimes", "not a known alias"),
        ("0 0 30 2 *", "never fires"),
    ],
)
def test_a_bad_cron_is_refused_with_the_schedule_message(cron: str, words: str) -> None:
    with pytest.raises(ValidationError) as info:
        schedule(cron=cron)
    error = info.value.errors()[0]
    assert error["loc"] == ("cron",)
    assert words in error["msg"]
    assert "Hint:" in error["msg"]


def test_a_bad_time_zone_is_refused_with_a_hint() -> None:
    with pytest.raises(ValidationError) as info:
        schedule(timezone="Europe/Pariss")
    error = info.value.errors()[0]
    assert error["loc"] == ("timezone",)
    assert "time zone 'Europe/Pariss' is unknown" in error["msg"]
    assert "Did you mean 'Europe/Paris'?" in error["msg"]


@pytest.mark.parametrize("field", ["target", "on_failure", "on_recovery"])
@pytest.mark.parametrize(
    "path", ["reports/daily", "f/reports", "x/alice/job", "/f/reports/daily", "f/Reports/Daily", ""]
)
def test_paths_must_be_workspace_paths(field: str, path: str) -> None:
    with pytest.raises(ValidationError) as info:
        schedule(**{field: path})
    error = info.value.errors()[0]
    assert error["loc"] == (field,)
    assert "u/<user>/<name>" in error["msg"]


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError) as info:
        schedule(crn="0 6 * * *")
    assert info.value.errors()[0]["type"] == "extra_forbidden"


def test_cron_and_target_are_required() -> None:
    with pytest.raises(ValidationError) as info:
        Schedule.model_validate({})
    assert {error["loc"] for error in info.value.errors()} == {("cron",), ("target",)}


def test_a_schedule_is_frozen() -> None:
    item = schedule()
    with pytest.raises(ValidationError):
        item.enabled = False  # type: ignore[misc]
