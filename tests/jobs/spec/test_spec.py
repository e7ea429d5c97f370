"""Templates: pydantic structure, `extends:`, `--set`, format detection, and fuzzing (arbitrary
YAML gives problems, never a traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.launch.checks import validate_document, validate_template_doc
from jobs.spec.document import (
    CUSTOM_JOB,
    CUSTOM_JOB_SPEC,
    TEMPLATE,
    apply_overrides,
    detect_format,
    load_document,
)
from jobs.spec.gcloud import load_template
from jobs.spec.template import JobTemplate, TemplateError
from tests.conftest import TEMPLATES

BASE = {
    "name": "base",
    "image": "trainer",
    "command": ["python", "-m", "trainer.launch"],
    "env": {"A": "1", "B": "2"},
    "pools": {"chief": {"machine": "n1-standard-4"}},
    "labels": {"team": "ml"},
}


def write(path: Path, doc: object) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("path", sorted(TEMPLATES.glob("*.yaml")), ids=lambda p: p.name)
def test_example_templates_are_valid_in_their_region(path: Path) -> None:
    template = load_template(path)
    assert validate_document(template.to_document(), TEMPLATE, region="us-central1") == []


def test_extends_merges_mappings_and_replaces_lists(tmp_path: Path) -> None:
    write(tmp_path / "base.yaml", BASE)
    child = write(
        tmp_path / "child.yaml",
        {
            "extends": "base.yaml",
            "name": "child",
            "command": ["python", "train.py"],
            "env": {"B": "3", "C": "4"},
            "pools": {"chief": {"machine": "n1-standard-8"}},
        },
    )
    template = load_template(child)
    assert template.name == "child"
    assert template.command == ["python", "train.py"]
    assert template.env == {"A": "1", "B": "3", "C": "4"}
    assert template.pools.chief.machine == "n1-standard-8"
    assert template.labels == {"team": "ml"}


def test_extends_cycle_and_missing_parent_are_problems(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", {**BASE, "extends": "b.yaml"})
    write(tmp_path / "b.yaml", {**BASE, "extends": "a.yaml"})
    document = load_document(tmp_path / "a.yaml")
    assert [p.path for p in document.problems] == ["extends"]
    assert "cycle" in document.problems[0].message
    write(tmp_path / "c.yaml", {**BASE, "extends": "nope.yaml"})
    assert "does not exist" in load_document(tmp_path / "c.yaml").problems[0].message


def test_set_overrides_parse_yaml_values_and_create_paths(tmp_path: Path) -> None:
    path = write(tmp_path / "t.yaml", BASE)
    template = load_template(
        path,
        [
            "pools.chief.replicas=1",
            "pools.workers.machine=n1-standard-4",
            "pools.workers.replicas=3",
            "command.1=-u",
            "scheduling.strategy=SPOT",
            "env.FLAG=true",
        ],
    )
    assert template.pools.workers is not None and template.pools.workers.replicas == 3
    assert template.command == ["python", "-u", "trainer.launch"]
    assert template.scheduling.strategy == "spot"
    assert template.env["FLAG"] == "true"


def test_bad_overrides_are_problems_not_exceptions() -> None:
    doc, problems = apply_overrides(BASE, ["novalue", "command.9=x", "name.x=1"], "t.yaml")
    assert doc == BASE
    assert [p.path for p in problems] == ["--set novalue", "--set command.9=x", "--set name.x=1"]


@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("persistent_disk_size_gb", "no persistent disk"),
        ("use_spot", "scheduling.strategy: spot"),
        ("machine_type", "write machine"),
        ("gpus", "accelerator_count"),
    ],
)
def test_invented_pool_fields_get_a_hint(key: str, hint: str) -> None:
    doc = {**BASE, "pools": {"chief": {"machine": "n1-standard-4", key: 1}}}
    problems = validate_template_doc(doc)
    assert [p.path for p in problems] == [f"pools.chief.{key}"]
    assert hint in (problems[0].hint or "")


def test_all_structural_and_rule_problems_are_reported_together() -> None:
    doc = {
        **BASE,
        "name": "Bad Name",
        "env": {"HF_TOKEN": "x", "my-var": "1"},
        "pools": {"chief": {"machine": "n1-standard-4", "replicas": 2, "useSpot": True}},
        "scheduling": {"timeout": "forever", "strategy": "cheap"},
    }
    paths = {p.path for p in validate_template_doc(doc)}
    assert {
        "name",
        "env.HF_TOKEN",
        "env.my-var",
        "pools.chief.replicas",
        "pools.chief.useSpot",
        "scheduling.timeout",
        "scheduling.strategy",
    } <= paths


def test_load_template_raises_with_every_structural_problem(tmp_path: Path) -> None:
    path = write(tmp_path / "t.yaml", {"name": "t", "pools": {}, "extra": 1})
    with pytest.raises(TemplateError) as err:
        load_template(path)
    assert {p.path for p in err.value.problems} == {"pools.chief", "extra"}
    assert all(p.source == str(path) for p in err.value.problems)


def test_env_scalars_become_strings_and_strategy_is_case_insensitive() -> None:
    template = JobTemplate.model_validate(
        {**BASE, "env": {"N": 3, "F": False}, "scheduling": {"strategy": "FLEX_START"}}
    )
    assert template.env == {"N": "3", "F": "false"}
    assert template.scheduling.strategy == "flex_start"


@pytest.mark.parametrize(
    ("doc", "kind"),
    [
        (BASE, TEMPLATE),
        ({"workerPoolSpecs": []}, CUSTOM_JOB_SPEC),
        ({"worker_pool_specs": []}, CUSTOM_JOB_SPEC),
        ({"displayName": "x", "jobSpec": {}}, CUSTOM_JOB),
        ([1, 2], TEMPLATE),
    ],
)
def test_format_is_detected(doc: object, kind: str) -> None:
    assert detect_format(doc) == kind


def test_invalid_yaml_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\npools: [\n")
    problems = load_document(path).problems
    assert problems and problems[0].path.startswith("line ")


# ---- fuzzing ------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=12)
)
keys = st.sampled_from(
    [
        "name",
        "pools",
        "chief",
        "workers",
        "reduction_server",
        "machine",
        "accelerator",
        "accelerator_count",
        "replicas",
        "env",
        "secrets",
        "scheduling",
        "strategy",
        "timeout",
        "max_wait",
        "image",
        "args",
        "labels",
        "boot_disk",
        "size_gb",
        "region",
        "tpu_topology",
        "workerPoolSpecs",
        "machineSpec",
        "jobSpec",
        "displayName",
        "containerSpec",
        "replicaCount",
        "diskSpec",
        "env",
        "value",
        "x",
    ]
) | st.text(max_size=8)
documents = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=6),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_any_document_gives_problems_never_a_traceback(doc: object) -> None:
    for problem in validate_document(doc, detect_format(doc), region="us-central1"):
        assert problem.path and problem.message


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_any_file_text_gives_problems_never_a_traceback(text: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "t.yaml"
        path.write_text(text)
        document = load_document(path, ["pools.chief.replicas=2"])
        if not document.problems:
            validate_document(document.doc, document.kind, source=str(path))


# ---- template-form specifics of the rules -------------------------------------------------


def test_secret_also_set_in_env_is_reported_once_at_both_places() -> None:
    doc = {**BASE, "env": {"HF_TOKEN": "x"}, "secrets": {"HF_TOKEN": "hf-token"}}
    problems = {p.path: p for p in validate_template_doc(doc)}
    assert "both in env and in secrets" in problems["secrets.HF_TOKEN"].message
    assert "secrets: {HF_TOKEN: hf-token}" in (problems["env.HF_TOKEN"].hint or "")


def test_template_reduction_server_defaults_to_googles_image_for_the_region() -> None:
    doc = {
        **BASE,
        "region": "europe-west4",
        "pools": {
            "chief": {"machine": "g2-standard-8"},
            "workers": {"machine": "g2-standard-8", "replicas": 1},
            "reduction_server": {"machine": "n1-highcpu-16", "replicas": 2},
        },
    }
    assert validate_template_doc(doc) == []
    doc["pools"]["reduction_server"]["image"] = "trainer"
    problems = validate_template_doc(doc)
    assert [p.path for p in problems] == ["pools.reduction_server.image"]
    assert "europe-docker.pkg.dev/vertex-ai-restricted" in (problems[0].hint or "")


def test_template_level_env_problems_are_not_repeated_per_pool() -> None:
    doc = {
        **BASE,
        "env": {f"V{i}": "1" for i in range(101)},
        "pools": {"chief": {"machine": "n1-standard-4"}, "workers": {"machine": "n1-standard-4"}},
    }
    problems = validate_template_doc(doc)
    assert [p.path for p in problems] == ["env"]


def test_validation_uses_the_stack_region_when_the_template_has_none() -> None:
    doc = JobTemplate.model_validate(
        {**BASE, "pools": {"chief": {"machine": "a2-highgpu-1g"}}}
    ).to_document()
    assert validate_template_doc(doc) == []
    problems = validate_template_doc(doc, region="europe-west1")
    assert [p.path for p in problems] == ["pools.chief.machine", "pools.chief.accelerator"]


def test_readme_examples_are_valid(tmp_path: Path) -> None:
    import re

    readme = (TEMPLATES / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", readme, re.S)
    assert len(blocks) == 2
    reference, extending = (yaml.safe_load(b) for b in blocks)
    assert validate_template_doc(reference, region="us-central1") == []
    path = write(
        tmp_path / "child.yaml", {**extending, "extends": str(TEMPLATES / "l4-spot-lora.yaml")}
    )
    template = load_template(path)
    assert template.scheduling.timeout == "3d" and template.pools.chief.machine == "g2-standard-8"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=4))
def test_any_set_override_gives_problems_never_a_traceback(overrides: list[str]) -> None:
    doc, problems = apply_overrides(BASE, overrides, "t.yaml")
    validate_document(doc, detect_format(doc))
    assert all(p.path.startswith("--set ") for p in problems)


def test_a_secret_value_or_a_bad_name_under_secrets_is_refused_without_echoing_it() -> None:
    token = "hf_" + "a1B2c3D4" * 5
    doc = {**BASE, "secrets": {"HF_TOKEN": token, "DB_PASSWORD": "my db password"}}
    problems = {p.path: p for p in validate_template_doc(doc)}
    assert "the secret's value, not its name" in problems["secrets.HF_TOKEN"].message
    assert "not a Secret Manager secret name" in problems["secrets.DB_PASSWORD"].message
    assert "secrets: {HF_TOKEN: hf-token}" in (problems["secrets.HF_TOKEN"].hint or "")
    shown = "\n".join(str(p) for p in problems.values())
    assert token not in shown and "my db password" not in shown
    fine = {**BASE, "secrets": {"A_TOKEN": "hf-token", "C": "projects/p/secrets/c/versions/3"}}
    assert validate_template_doc(fine) == []


def test_a_key_written_twice_is_reported_with_its_key_path_and_lines(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(
        'name: dup\nimage: x\nenv:\n  A: "1"\n  A: "2"\npools: {chief: {machine: n1-standard-4}}\n'
    )
    document = load_document(path)
    assert [(p.path, p.message) for p in document.problems] == [
        (
            "env.A",
            "key written twice (lines 4 and 5); YAML would keep only the last one without a word",
        )
    ]


# ---- hostile files: a problem with a place, fast, never an exception ----------------------

NEST = 5000
HOSTILE_FILES = {
    # name: (file bytes, problem path, fragment of the message)
    "deep lists": (
        ("name: x\nlabels: " + "[" * NEST + "]" * NEST + "\n").encode(),
        # PyYAML 6.0.4's libyaml reads a flow list ahead and stops it itself: the place is then
        # where the list began, a prefix of the path found with 6.0.3.
        "labels[0]",
        "nested more than 32 levels deep",
    ),
    "deep mappings": (
        ("name: x\nenv: " + "{a: " * NEST + "1" + "}" * NEST + "\n").encode(),
        "env" + ".a" * 31,
        "nested more than 32 levels deep",
    ),
    "deep block mappings": (
        "".join(f"{'  ' * i}k:\n" for i in range(200)).encode(),
        "k" + ".k" * 31,
        "nested more than 32 levels deep",
    ),
    "not UTF-8": (
        b"name: x\ndescription: caf\xe9\n",
        "line 2, column 17",
        "byte 0xe9 at offset 24",
    ),
    "UTF-16": ("name: x\n".encode("utf-16"), "line 1, column 1", "not UTF-8 text: byte 0xff"),
    "NUL bytes": (b"name: x\x00\n", "line 1, column 8", "#x0000 is not allowed"),
    "20 MB": (b"name: x\n#" + b"x" * 20_000_000 + b"\n", "(file)", "is 20,000,010 bytes"),
    "200,000 args": (
        ("name: x\nargs: [" + ",".join(["a"] * 200_000) + "]\n").encode(),
        "(file)",
        "is 400,016 bytes",
    ),
    "billion laughs": (
        (
            "a: &a [x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n"
                for i in range(8)
            )
        ).encode(),
        "e[1]",
        "more than 20,000 values",
    ),
    "unpaired surrogate escape": (b'name: x\ndescription: "\\ud800"\n', "line 2, column ", ""),
    "key written twice in flow": (b"name: x\nenv: {A: '1', A: '2'}\n", "env.A", "written twice"),
}


@pytest.mark.parametrize(
    ("content", "path", "message"), HOSTILE_FILES.values(), ids=list(HOSTILE_FILES)
)
def test_hostile_files_are_one_problem_with_its_place(
    tmp_path: Path, content: bytes, path: str, message: str
) -> None:
    file = tmp_path / "job.yaml"
    file.write_bytes(content)
    document = load_document(file)
    assert len(document.problems) == 1, document.problems
    problem = document.problems[0]
    assert problem.path.startswith(path) and message in problem.message, problem
    assert problem.source == str(file)


def test_a_directory_or_a_missing_file_is_a_problem(tmp_path: Path) -> None:
    assert load_document(tmp_path).problems[0].message == "is a directory"
    assert load_document(tmp_path / "nope.yaml").problems[0].message == "does not exist"


@pytest.mark.parametrize(
    ("override", "path", "message"),
    [
        ("labels=" + "[" * NEST + "]" * NEST, "--set labels=", "nested more than 32 levels"),
        ("a" + ".a" * NEST + "=1", "--set aa", "more than 32 levels"),
        ("env.A=caf\udce9", "--set env.A=", "not UTF-8 text: byte 0xe9"),
        ("env={A: 1, A: 2}", "--set env=", "written twice"),
    ],
    ids=["deep value", "deep key path", "not UTF-8", "key written twice"],
)
def test_hostile_set_overrides_are_problems(override: str, path: str, message: str) -> None:
    doc, problems = apply_overrides(BASE, [override], "t.yaml")
    assert len(problems) == 1, problems
    assert problems[0].path.replace(".", "").startswith(path.replace(".", "")[:12])
    assert message in problems[0].message, problems[0]
    assert doc == BASE


def test_yaml_merge_keys_may_still_override_what_they_merge(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text(
        "name: merge\nimage: x\npools:\n  chief: &c {machine: n1-standard-4}\n"
        "  workers:\n    <<: *c\n    machine: n1-standard-8\n"
    )
    document = load_document(path)
    assert document.problems == []
    assert document.doc["pools"]["workers"] == {"machine": "n1-standard-8"}


@pytest.mark.parametrize("value", [0, -3, float("inf"), float("nan"), "lots", 1e-9])
def test_a_budget_is_a_positive_finite_number_of_dollars(value: object) -> None:
    with pytest.raises(TemplateError) as err:
        JobTemplate.from_document({**BASE, "budget": {"max_cost_usd": value}})
    (problem,) = err.value.problems
    assert problem.path == "budget.max_cost_usd"
    assert problem.hint is not None and "max_cost_usd: 25" in problem.hint


@pytest.mark.parametrize("team", ["NLP", "nlp_team", "-nlp", "n" * 31, ""])
def test_a_team_is_a_short_lower_case_name(team: str) -> None:
    with pytest.raises(TemplateError) as raised:
        JobTemplate.from_document({**BASE, "team": team})
    [problem] = raised.value.problems
    assert problem.path == "team"
    assert "starting with a letter" in problem.message and "team: nlp" in (problem.hint or "")


def test_a_budget_is_kept_to_the_micro_dollar_its_label_carries() -> None:
    template = JobTemplate.from_document({**BASE, "budget": {"max_cost_usd": 12.5000004}})
    assert template.budget is not None and template.budget.max_cost_usd == 12.5
