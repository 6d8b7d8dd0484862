"""Who can start the self-hosted MI300X job: .github/workflows/gate-mi300x.yml's job conditions
evaluated on an event payload of each kind (suite/workflow_events/), with GitHub's expression
semantics (scripts/gh_expressions.py), plus the properties that make those conditions a boundary:
the workflow is the base branch's (pull_request_target, never pull_request), the runner's set-up
runs main's scripts only, actions are pinned, and no checkout keeps credentials.

Symptom: gate-mi300x.yml ran on every pull_request, forks included, directly on the runner, with a
compile cache shared with main. Fix: the trigger and conditions below; main's cache written by
main's runs only (a pull request's is a tmpfs copy in its container, scripts/mi300x-container.sh);
the code under test only inside the pinned container.
"""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
import yaml

from tilegate.gate.paths import REPO_ROOT

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
EVENTS = sorted((REPO_ROOT / "suite" / "workflow_events").glob("*.json"))
SHA = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gh = _load("gh_expressions")


def _workflow(name: str) -> dict:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


MI300X = _workflow("gate-mi300x.yml")


def _context(event: dict) -> dict:
    return {
        "github": {
            "event_name": event["event_name"],
            "ref": event["ref"],
            "repository": event["repository"],
            "event": event["event"],
        },
        "inputs": event["inputs"],
        "env": MI300X.get("env", {}),
    }


@pytest.mark.parametrize("path", EVENTS, ids=lambda p: p.stem)
def test_only_trusted_events_start_the_mi300x_jobs(path):
    event = json.loads(path.read_text())
    started = {
        job: gh.truthy(gh.evaluate(spec["if"], _context(event)))
        for job, spec in MI300X["jobs"].items()
        if "self-hosted" in spec["runs-on"]
    }
    assert started == event["jobs"], f"{path.stem}: started {started}, expected {event['jobs']}"


def test_the_payloads_cover_every_trigger_and_a_fork_never_runs_unlabelled():
    events = [json.loads(p.read_text()) for p in EVENTS]
    assert {e["event_name"] for e in events} == set(MI300X["on"])
    forks = [
        e
        for e in events
        if e["event_name"] == "pull_request_target"
        and (e["event"]["pull_request"]["head"]["repo"] or {}).get("full_name") != e["repository"]
    ]
    assert any(e["jobs"]["gate"] for e in forks) and all(
        e["jobs"]["gate"]
        == (e["event"]["action"] == "labeled" and e["event"]["label"]["name"] == "mi300x-approved")
        for e in forks
    )


def test_the_mi300x_workflow_is_never_the_pull_requests_own():
    """With pull_request, the workflow and its conditions would come from the pull request's merge
    commit, which a fork edits: the conditions would bound nothing."""
    assert "pull_request" not in MI300X["on"] and "pull_request_target" in MI300X["on"]
    assert set(MI300X["on"]) <= {"push", "pull_request_target", "schedule", "workflow_dispatch"}
    assert MI300X["permissions"] == {"contents": "read"}
    assert all("permissions" not in job for job in MI300X["jobs"].values())


def _steps(doc: dict):
    for job_name, job in doc["jobs"].items():
        for step in job["steps"]:
            yield job_name, job, step


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOWS.glob("*.yml")))
def test_actions_are_pinned_and_checkouts_keep_no_credentials(name):
    for job_name, _job, step in _steps(_workflow(name)):
        if "uses" in step:
            assert SHA.match(step["uses"]), (
                f"{name} {job_name}: {step['uses']} is not pinned to a commit"
            )
        if str(step.get("uses", "")).startswith("actions/checkout@"):
            assert step.get("with", {}).get("persist-credentials") is False, (
                f"{name} {job_name}: checkout keeps credentials"
            )


def test_on_the_runner_only_mains_scripts_run_and_the_code_under_test_only_in_the_container():
    """The host runs main's scripts (trusted/) and nothing of the code under test: that commit is
    never checked out (no .git on the host), only exported and mounted read-only into the container;
    the upload and the summary read only the plain files collect_records.py copied out."""
    for job_name, job, step in _steps(MI300X):
        if "self-hosted" not in job["runs-on"]:
            continue
        # what follows `mi300x-container.sh gate TREE OUT CACHE SCRATCH WHEELS --` runs inside the
        # container
        run = re.sub(
            r"(mi300x-container\.sh\s+gate(\s+\S+){4}\s+--).*",
            r"\1",
            step.get("run", ""),
            flags=re.S,
        )
        for command in re.findall(r"(?:^|[\s;&|(])(?:bash|sh|python3?)\s+(\S+)", run):
            assert command.startswith("trusted/scripts/"), (
                f"{job_name}: runs {command} on the runner"
            )
        assert not re.search(r"\b(cd|git)\s", run), (
            f"{job_name}: enters a folder or runs git on the runner"
        )
        if "mi300x-container.sh gate" in run:
            assert '"$HOME/.cache/tilegate/main"' in run and job["env"]["TRUST"], (
                f"{job_name}: no per-trust cache for the container"
            )
        if str(step.get("uses", "")).startswith("actions/checkout@"):
            assert step["with"] == {"path": "trusted", "persist-credentials": False}, (
                f"{job_name}: checks out {step}"
            )
        if str(step.get("uses", "")).startswith("actions/upload-artifact@"):
            assert step["with"]["path"] == "${{ runner.temp }}/${{ env.TILEGATE_RUN }}/records/", (
                f"{job_name}: uploads {step}"
            )
            assert step["with"]["include-hidden-files"] is True  # .test_durations
        if "step_summary.py" in run:
            assert '"$RUNNER_TEMP/$TILEGATE_RUN/records/artifacts"' in run, (
                f"{job_name}: summarises uncollected records"
            )
    assert "allow-unsafe-pr-checkout" not in (WORKFLOWS / "gate-mi300x.yml").read_text()
    export = next(
        s for _, _, s in _steps(MI300X) if s.get("name") == "Export the commit under test"
    )
    assert export["env"]["SHA"] == "${{ github.event.pull_request.head.sha || github.sha }}"


@pytest.mark.parametrize(
    "expression, want",
    [
        ("'a' == 'A'", True),
        ("null == ''", True),
        ("'x' == 0", False),
        ("!('a' != 'a')", True),
        ("true && 'yes'", "yes"),
        ("'' || 'fallback'", "fallback"),
        ("contains('Hello', 'ELL')", True),
        ("github.event.missing.deeper == null", True),
        ("github['event_name'] == 'push'", True),
    ],
)
def test_the_expression_evaluator_follows_githubs_rules(expression, want):
    assert gh.evaluate(expression, {"github": {"event_name": "push", "event": {}}}) == want
