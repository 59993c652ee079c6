"""Schedule items: what one may hold, whom it runs as, pausing and resuming, running a script."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.workspace.conftest import Team

from tidemill.errors import InvalidSchedule, ItemNotFound, PermissionDenied
from tidemill.flows import Cron
from tidemill.workspace import InvalidValue, ScheduleInfo

NIGHTLY = {"cron": "0 30 2 * * *", "timezone": "Europe/Paris", "target": "f/team/flow"}


async def test_a_schedule_is_written_like_any_item_and_runs_as_its_writer(team: Team) -> None:
    item = await team.olga.write("f/team/nightly", "schedule", NIGHTLY, message="first")
    assert (item.kind, item.version, item.updated_by) == ("schedule", 1, "olga")
    assert item.summary == "f/team/flow at `0 30 2 * * *` (Europe/Paris)"
    info = await team.vic.schedule("f/team/nightly")
    assert isinstance(info, ScheduleInfo)
    assert (info.owner, info.version, info.spec.catch_up) == ("olga", 1, "latest")
    cron = Cron.parse("0 30 2 * * *", "Europe/Paris")
    assert info.next_fires[0] > info.updated_at
    assert list(info.next_fires) == cron.next_fires(info.next_fires[0] - 1, 5)


async def test_yaml_text_is_a_schedule_too(team: Team) -> None:
    text = "cron: '*/5 * * * *'\ntarget: f/team/script\ninputs: {name: ada}\ncatch_up: all\n"
    await team.ada.write("f/team/often", "schedule", text)
    info = await team.ada.schedule("f/team/often")
    assert (info.spec.target, info.spec.inputs, info.spec.catch_up) == (
        "f/team/script",
        {"name": "ada"},
        "all",
    )


@pytest.mark.parametrize(
    ("value", "told"),
    [
        ({**NIGHTLY, "every": 3}, "at every: Extra inputs are not permitted"),
        ({"cron": "0 2 * * *"}, "at target: Field required"),
        ({**NIGHTLY, "catch_up": "some"}, "at catch_up"),
        ({**NIGHTLY, "target": "nowhere"}, "not a workspace path"),
        (["0 2 * * *"], "a schedule is a mapping"),
    ],
)
async def test_what_is_no_schedule_is_refused_with_its_problems(
    team: Team, value: object, told: str
) -> None:
    with pytest.raises(InvalidValue) as caught:
        await team.ada.write("f/team/bad", "schedule", value)
    assert told in str(caught.value) and caught.value.hint
    with pytest.raises(ItemNotFound):
        await team.ada.get("f/team/bad")  # nothing was written


async def test_a_bad_cron_or_time_zone_says_what_is_wrong(team: Team) -> None:
    for value in ({**NIGHTLY, "cron": "0 25 * * *"}, {**NIGHTLY, "timezone": "Europe/Pariss"}):
        with pytest.raises((InvalidSchedule, InvalidValue)) as caught:
            await team.ada.write("f/team/bad", "schedule", value)
        assert caught.value.hint


async def test_the_target_and_handlers_must_be_what_the_writer_may_run(team: Team) -> None:
    await team.max.write("u/max/script", "script", "def main():\n    return 1\n")
    # max may not read f/team/flow: his schedule may not run it.
    with pytest.raises(InvalidValue) as caught:
        await team.max.write("u/max/nightly", "schedule", NIGHTLY)
    assert "no flow or script that max may run" in str(caught.value)
    assert caught.value.problems == ["at target: no flow or script f/team/flow that max may read"]
    # A variable is nothing to run; a handler must be a flow.
    with pytest.raises(InvalidValue, match="is a variable"):
        await team.ada.write("f/team/bad", "schedule", {**NIGHTLY, "target": "f/team/region"})
    with pytest.raises(InvalidValue, match="on_failure f/team/script is no flow"):
        await team.ada.write("f/team/bad", "schedule", {**NIGHTLY, "on_failure": "f/team/script"})
    await team.max.write("u/max/own", "schedule", {**NIGHTLY, "target": "u/max/script"})


async def test_only_a_writer_pauses_and_resumes_each_a_new_version(team: Team) -> None:
    await team.ada.write("f/team/nightly", "schedule", NIGHTLY)
    for reader in (team.vic, team.max):  # as `write` refuses them, telling nothing more
        with pytest.raises(PermissionDenied):
            await reader.pause_schedule("f/team/nightly")
    paused = await team.olga.pause_schedule("f/team/nightly")
    assert (paused.spec.enabled, paused.next_fires, paused.owner) == (False, (), "olga")
    again = await team.olga.pause_schedule("f/team/nightly")  # already paused: no new version
    assert again.version == paused.version == 2
    resumed = await team.ada.resume_schedule("f/team/nightly")
    assert (resumed.spec.enabled, resumed.version, resumed.owner) == (True, 3, "ada")
    history = await team.ada.history("f/team/nightly")
    assert [v.message for v in history] == ["resumed", "paused", ""]
    actions = [e.action for e in await team.ada.audit(path="f/team/nightly")]
    assert actions == ["item.write", "schedule.paused", "schedule.resumed"]


async def test_resuming_checks_the_resumer_may_run_it(team: Team) -> None:
    await team.ada.add_folder("lab", roles={"max": "writer"})
    await team.ada.write("f/lab/nightly", "schedule", NIGHTLY)
    await team.max.pause_schedule("f/lab/nightly")  # a writer may always stop it
    with pytest.raises(InvalidValue, match="max may run"):
        await team.max.resume_schedule("f/lab/nightly")  # but not run f/team/flow as himself
    assert (await team.ada.schedule("f/lab/nightly")).spec.enabled is False


async def test_schedules_lists_what_the_principal_may_read(team: Team) -> None:
    await team.ada.write("f/team/nightly", "schedule", NIGHTLY)
    await team.ada.write("u/max/script", "script", "def main():\n    return 1\n")
    await team.ada.write("u/max/own", "schedule", {**NIGHTLY, "target": "u/max/script"})
    assert [s.path for s in await team.ada.schedules()] == ["f/team/nightly", "u/max/own"]
    assert [s.path for s in await team.vic.schedules()] == ["f/team/nightly"]
    assert [s.path for s in await team.max.schedules()] == ["u/max/own"]
    assert [s.path for s in await team.ada.schedules("f/team/")] == ["f/team/nightly"]
    assert await team.ada.schedule_fires("f/team/nightly") == []
    with pytest.raises(ItemNotFound):
        await team.max.schedule_fires("f/team/nightly")
    with pytest.raises(ItemNotFound):
        await team.ada.schedule("f/team/flow")  # a flow is no schedule


async def test_a_script_runs_as_a_one_step_flow_of_it(team: Team) -> None:
    plan = await team.vic.run_plan("f/team/script", inputs={"name": "ada"})
    assert plan.run_as == "vic"
    assert plan.source["items"] == {"f/team/script": 2} and plan.source["version"] == 2
    (step,) = plan.flow.steps
    assert step.id == "script" and plan.flow.validate_input({"name": "x"}) == {"name": "x"}
    assert list(step.inputs) == ["name"]
    with pytest.raises(ItemNotFound):
        await team.max.run_plan("f/team/script")


async def test_a_schedule_syncs_as_a_yaml_file_with_its_target(team: Team, tmp_path: Path) -> None:
    await team.ada.write("f/team/nightly", "schedule", {**NIGHTLY, "inputs": {"n": 1}})
    await team.ada.pull(tmp_path)
    text = (tmp_path / "f/team/nightly.schedule.yaml").read_text()
    assert "cron: 0 30 2 * * *" in text and "target: f/team/flow" in text
    other = await team.ada.acting_as("ada")
    await other.delete("f/team/nightly")
    await other.delete("f/team/flow")
    await team.ada.push(tmp_path)  # the schedule and the flow it runs, in one push
    info = await team.ada.schedule("f/team/nightly")
    assert (info.spec.inputs, info.version) == ({"n": 1}, 2)
