"""SPEED-Bench: loading prepared files, refusing placeholders, and the prepare step (offline stand-ins)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_fixtures import (
    FakeHub,
    GatedError,
    cnn_source,
    placeholder_row,
    qualitative_rows,
    speed_row,
    throughput_rows,
    write_jsonl,
    write_parquet,
)

from specmeter.common.errors import InputError, RowNotFillable
from specmeter.data.speed_bench import CONFIGS, DATASET, DEFAULT_REVISION, load_speed_bench, prepared_file_name
from specmeter.data.speed_bench_prepare import MANIFEST, prepare
from specmeter.data.speed_bench_sources import FILLERS, FillContext, fill_template, find_filler

# ---------------------------------------------------------------- loading prepared data


def test_load_prepared_jsonl_keeps_fields_in_metadata(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "speed_bench_qualitative.jsonl", [
        speed_row("a1", "coding", ["Write code."]),
        speed_row("a2", "writing", ["Write a poem.", "Shorter."], o200k_tokens=12),
    ])
    first, second = load_speed_bench(path)
    assert (first.id, first.category, first.turns) == ("a1", "coding", ["Write code."])
    assert first.metadata["source"] == "made-up/source" and "turns" not in first.metadata
    assert second.multi_turn and second.metadata["o200k_tokens"] == 12


def test_load_prepared_parquet(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "prepared.parquet", [speed_row("p1", "math", ["What is 2 + 2?"])])
    (conversation,) = load_speed_bench(path)
    assert conversation.turns == ["What is 2 + 2?"] and conversation.category == "math"


def test_placeholder_row_is_rejected_with_file_line_and_the_prepare_command(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "raw.jsonl", [
        speed_row("a1", "coding", ["Real prompt."]),
        placeholder_row("a2", "summarization", "abisee/cnn_dailymail", "x", "Summarize {article}"),
    ])
    with pytest.raises(InputError) as caught:
        load_speed_bench(path)
    message = str(caught.value)
    assert f"{path} line 2" in message and 'field "turns"' in message
    assert "specmeter data prepare speed-bench" in message


def test_placeholder_in_parquet_names_the_row(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "raw.parquet", [placeholder_row("a", "qa", "s", "x", "t {question}")])
    with pytest.raises(InputError, match=r"row 1: .*specmeter data prepare speed-bench"):
        load_speed_bench(path)


@pytest.mark.parametrize(("row", "field"), [
    ({"category": "qa", "turns": ["x"]}, "question_id"),
    ({"question_id": "q", "turns": ["x"]}, "category"),
    ({"question_id": "q", "category": "qa", "turns": "not a list"}, "turns"),
    ({"question_id": "q", "category": "qa", "turns": ["fine", " "]}, "turns"),
])
def test_malformed_prepared_rows(tmp_path: Path, row: dict, field: str) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [speed_row("ok", "qa", ["fine"]), row])
    with pytest.raises(InputError, match=rf'bad.jsonl line 2: field "{field}"'):
        load_speed_bench(path)


def test_directory_needs_a_config_when_it_holds_several_files(tmp_path: Path) -> None:
    write_jsonl(tmp_path / prepared_file_name("qualitative"), [speed_row("q", "qa", ["Q?"])])
    write_jsonl(tmp_path / prepared_file_name("throughput_1k"), [speed_row("t", "mixed", ["T?"])])
    with pytest.raises(InputError, match="several data files"):
        load_speed_bench(tmp_path)
    assert load_speed_bench(tmp_path, config="throughput_1k")[0].id == "t"
    with pytest.raises(InputError, match="qualitative"):
        load_speed_bench(tmp_path, config="bogus")
    with pytest.raises(InputError, match="prepare speed-bench"):
        load_speed_bench(tmp_path, config="throughput_8k")


# ---------------------------------------------------------------- prepare


def _hub(**overrides) -> FakeHub:
    sources = {"abisee/cnn_dailymail": cnn_source(), "cais/hle": GatedError("401 Client Error: this dataset is gated")}
    sources.update(overrides)
    return FakeHub({"qualitative": qualitative_rows(), "throughput_1k": throughput_rows()}, sources)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_prepare_fills_drops_and_reports_gated_sources(tmp_path: Path) -> None:
    report = prepare("qualitative", out_dir=tmp_path, loader=_hub()).configs["qualitative"]
    rows = {row["question_id"]: row for row in _rows(tmp_path / prepared_file_name("qualitative"))}

    # text rows kept, the cnn_dailymail placeholder filled from the stand-in source through the template
    assert {"q-01", "q-03", "q-02"} <= set(rows)
    assert rows["q-02"]["turns"] == ["Summarize this article:\n\nThe river rose overnight and the bridge was closed."]
    assert report.filled == {"abisee/cnn_dailymail": 1}
    # no filler for MMLU-Pro: dropped and counted; the gated source: dropped, named, with the login fix
    assert "q-04" not in rows and "q-05" not in rows
    assert report.dropped == {"TIGER-Lab/MMLU-Pro": 1, "cais/hle": 1}
    assert "cais/hle" in report.problems["cais/hle"] and "HF_TOKEN" in report.problems["cais/hle"]
    assert report.rows_written == len(rows) == report.rows_in - sum(report.dropped.values())
    assert any("cais/hle" in line for line in report.lines())
    # nothing written can trip the loader's placeholder check
    assert len(load_speed_bench(tmp_path, config="qualitative")) == len(rows)


def test_prepare_asks_for_the_pinned_revision_and_split(tmp_path: Path) -> None:
    hub = _hub()
    prepare("throughput_1k", out_dir=tmp_path, loader=hub)
    prepare("throughput_1k", revision="0123abc", out_dir=tmp_path / "other", loader=hub)
    asked = [kwargs for path, kwargs in hub.calls if path == DATASET]
    assert asked[0] == {"name": "throughput_1k", "revision": DEFAULT_REVISION, "split": "test"}
    assert asked[1]["revision"] == "0123abc"
    manifest = json.loads((tmp_path / "other" / MANIFEST).read_text())
    assert manifest["configs"]["throughput_1k"]["revision"] == "0123abc"


def test_prepare_output_is_sorted_and_keeps_the_o200k_count(tmp_path: Path) -> None:
    prepare("throughput_1k", out_dir=tmp_path, loader=_hub())
    path = tmp_path / prepared_file_name("throughput_1k")
    rows = _rows(path)
    assert [r["question_id"] for r in rows] == sorted(r["question_id"] for r in rows)
    for line in path.read_text(encoding="utf-8").splitlines():
        assert line == json.dumps(json.loads(line), sort_keys=True, ensure_ascii=False)
    assert all(c.metadata["o200k_tokens"] == 1000 for c in load_speed_bench(path))


def test_prepare_is_byte_identical_whatever_the_config_order(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    prepare("qualitative", out_dir=first, loader=_hub())
    prepare("throughput_1k", out_dir=first, loader=_hub())
    prepare("throughput_1k", out_dir=second, loader=_hub())
    prepare("qualitative", out_dir=second, loader=_hub())
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    assert MANIFEST in names and prepared_file_name("qualitative") in names
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_rerun_without_access_keeps_rows_prepared_before(tmp_path: Path) -> None:
    hle_item = [{"id": "hle-7", "question": "What is the oldest surviving written law code?"}]
    prepare("qualitative", out_dir=tmp_path, loader=_hub(**{"cais/hle": hle_item}))
    offline = _hub(**{"abisee/cnn_dailymail": ConnectionError("offline")})
    again = prepare("qualitative", out_dir=tmp_path, loader=offline)
    report = again.configs["qualitative"]
    rows = {row["question_id"]: row for row in _rows(tmp_path / prepared_file_name("qualitative"))}
    assert rows["q-05"]["turns"] == [hle_item[0]["question"]]
    assert "q-02" in rows and report.reused == 2 and not report.dropped.get("cais/hle")


def test_custom_filler_registry_and_unreachable_source(tmp_path: Path) -> None:
    hub = FakeHub({"qualitative": [
        placeholder_row("r1", "rag", "https://example.org/stand-in/file.json", "3", "Context: {question}"),
        placeholder_row("r2", "rag", "other/offline", "1", "{question}"),
    ]})

    def stand_in(row, ctx: FillContext) -> list[str]:
        return [fill_template("Context: {question}", question=f"item {row['src_id']}"), "Follow-up?"]

    report = prepare("qualitative", out_dir=tmp_path, loader=hub,
                     fillers={"stand-in": stand_in, "other/offline": FILLERS["abisee/cnn_dailymail"]})
    ((row,),) = [_rows(tmp_path / prepared_file_name("qualitative"))]
    assert row["turns"] == ["Context: item 3", "Follow-up?"]
    result = report.configs["qualitative"]
    assert result.filled == {"stand-in": 1} and result.dropped == {"other/offline": 1}
    assert "could not be loaded" in result.problems["other/offline"]


def test_filler_exceptions_drop_the_row_instead_of_aborting(tmp_path: Path) -> None:
    hub = FakeHub({"qualitative": [speed_row("k", "qa", ["Kept."]),
                                   placeholder_row("x", "qa", "broken/source", "1", "{question}")]})

    def broken(row, ctx):
        raise KeyError("column renamed")

    report = prepare("qualitative", out_dir=tmp_path, loader=hub, fillers={"broken/source": broken})
    assert report.configs["qualitative"].dropped == {"broken/source": 1}
    assert [r["question_id"] for r in _rows(tmp_path / prepared_file_name("qualitative"))] == ["k"]


def test_prepare_all_writes_every_config(tmp_path: Path) -> None:
    hub = FakeHub({name: [speed_row(f"{name}-1", "mixed", [f"Prompt for {name}."])] for name in CONFIGS})
    report = prepare("all", out_dir=tmp_path, loader=hub)
    assert set(report.configs) == set(CONFIGS)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert set(manifest["configs"]) == set(CONFIGS)
    assert all((tmp_path / prepared_file_name(name)).is_file() for name in CONFIGS)


def test_gated_main_dataset_is_an_input_error_with_the_fix(tmp_path: Path) -> None:
    def refuse(path, **kwargs):
        raise GatedError("403 Forbidden: access to this gated dataset requires accepting the license")

    with pytest.raises(InputError) as caught:
        prepare("qualitative", out_dir=tmp_path, loader=refuse)
    assert DATASET in str(caught.value) and "HF_TOKEN" in str(caught.value)


def test_unknown_config_lists_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="throughput_32k"):
        prepare("throughput_4k", out_dir=tmp_path, loader=_hub())


def test_prepare_accepts_a_datasets_stand_in(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    hub = FakeHub({"qualitative": qualitative_rows()}, {"abisee/cnn_dailymail": cnn_source()},
                  wrap=datasets.Dataset.from_list)
    report = prepare("qualitative", out_dir=tmp_path, loader=hub)
    assert report.configs["qualitative"].filled == {"abisee/cnn_dailymail": 1}


# ---------------------------------------------------------------- fillers


def test_template_placeholders_must_match_what_the_filler_provides() -> None:
    assert fill_template("A: {article}", article="x") == "A: x"
    assert fill_template("{question[en]} -> {question[de]}", question={"en": "hi", "de": "hallo"}) == "hi -> hallo"
    with pytest.raises(RowNotFillable):
        fill_template("needs {other}", article="x")
    with pytest.raises(RowNotFillable):
        fill_template("no fields at all", article="x")


def test_sources_given_as_urls_find_their_filler() -> None:
    url = "https://huggingface.co/datasets/mtbench101/mt-bench-101/raw/main/data.jsonl"
    assert find_filler(url, FILLERS)[0] == "mtbench101/mt-bench-101"
    assert find_filler("TIGER-Lab/MMLU-Pro", FILLERS) is None


def test_builtin_fillers_on_stand_in_sources(tmp_path: Path) -> None:
    mtbench_url = "https://example.org/mtbench101/mt-bench-101/test.jsonl"
    rows = [
        placeholder_row("c1", "coding", "deepmind/code_contests", "prob-a", "Solve:\n{question}"),
        placeholder_row(
            "c2", "coding", "livecodebench/code_generation_lite", "lc-9", "{question}\n```\n{starter_code}\n```"
        ),
        placeholder_row("m1", "multilingual", "Helsinki-NLP/opus-100", "opus_de-en_1", "Translate: {question[de]}"),
        placeholder_row("r1", "roleplay", mtbench_url, "mt_0", "unused"),
    ]
    hub = FakeHub({"qualitative": rows}, {
        "deepmind/code_contests": [{"name": "prob-a", "description": "Add two numbers."}],
        "json": [{"question_id": "lc-9", "question_content": "Reverse a list.", "starter_code": "def f(x):"}],
        "Helsinki-NLP/opus-100": [{"translation": {"de": "eins", "en": "one"}},
                                  {"translation": {"de": "zwei", "en": "two"}}],
    })
    # the mt-bench-101 and livecodebench fillers both load through "json"; route by data_files
    def route(path, **kwargs):
        if path == "json" and "mtbench101" in str(kwargs.get("data_files")):
            return [{"history": [{"user": "Hi, who are you?", "bot": "x"}, {"user": "Tell me more.", "bot": "y"}]}]
        return hub(path, **kwargs)

    report = prepare("qualitative", out_dir=tmp_path, loader=route).configs["qualitative"]
    turns = {r["question_id"]: r["turns"] for r in _rows(tmp_path / prepared_file_name("qualitative"))}
    assert turns == {
        "c1": ["Solve:\nAdd two numbers."],
        "c2": ["Reverse a list.\n```\ndef f(x):\n```"],
        "m1": ["Translate: zwei"],
        "r1": ["Hi, who are you?", "Tell me more."],
    }
    assert sum(report.filled.values()) == 4 and not report.dropped

