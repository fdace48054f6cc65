"""Configuration validation (config/models.py): every wrong input fails in one line naming the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from specmeter.common.errors import InputError
from specmeter.config import models as config
from specmeter.config.files import build_model, laid_over, load_yaml, parse_spec_json
from specmeter.config.models import (
    ConcurrencyPoint,
    EngineSpec,
    LoadSpec,
    RatePoint,
    SpecConfig,
    SpecMethod,
    validate_dynamic_k,
)
from specmeter.load import eventloop


def spec_error(raw: Any) -> str:
    with pytest.raises(InputError) as info:
        parse_spec_json(json.dumps(raw))
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert msg.startswith("--spec:")
    return msg


# ---- SpecConfig ----------------------------------------------------------------------------------


def test_default_is_off() -> None:
    spec = SpecConfig()
    assert spec.method is SpecMethod.none and not spec.enabled and spec.k == 0
    assert spec.label() == "off"
    # K without a method is harmless: speculation stays off.
    assert not SpecConfig(num_speculative_tokens=3).enabled


@pytest.mark.parametrize("method", ["ngram", "suffix", "draft_model", "eagle", "eagle3", "mtp"])
def test_every_method_needs_k(method: str) -> None:
    raw: dict[str, Any] = {"method": method}
    if method in ("draft_model", "eagle", "eagle3"):
        raw["draft_model"] = "d"
    msg = spec_error(raw)
    assert "num_speculative_tokens" in msg and method in msg


@pytest.mark.parametrize("method", ["draft_model", "eagle", "eagle3"])
def test_draft_methods_need_a_draft_model(method: str) -> None:
    msg = spec_error({"method": method, "num_speculative_tokens": 3})
    assert "draft_model" in msg


@pytest.mark.parametrize("method", ["ngram", "suffix", "mtp"])
def test_methods_without_draft_model(method: str) -> None:
    spec = parse_spec_json(json.dumps({"method": method, "num_speculative_tokens": 2}))
    assert spec.enabled and spec.k == 2 and spec.draft_model is None


@pytest.mark.parametrize("k", [0, -1, 65])
def test_k_out_of_range(k: int) -> None:
    msg = spec_error({"method": "ngram", "num_speculative_tokens": k})
    assert "'num_speculative_tokens'" in msg


def test_k_wrong_type_names_key() -> None:
    assert "'num_speculative_tokens'" in spec_error({"method": "ngram", "num_speculative_tokens": "four"})


def test_unknown_method_names_key() -> None:
    msg = spec_error({"method": "medusa2", "num_speculative_tokens": 2})
    assert "'method'" in msg


def test_prompt_lookup_min_greater_than_max() -> None:
    msg = spec_error({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 5, "prompt_lookup_max": 2})
    assert "prompt_lookup_min" in msg and "prompt_lookup_max" in msg
    ok = parse_spec_json('{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, '
                         '"prompt_lookup_max": 2}')
    assert (ok.prompt_lookup_min, ok.prompt_lookup_max) == (2, 2)
    assert "'prompt_lookup_min'" in spec_error({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 0})


def test_model_alias_for_draft_model() -> None:
    # vLLM's own key pastes in unchanged.
    a = parse_spec_json('{"method": "draft_model", "model": "/m/draft", "num_speculative_tokens": 3}')
    b = parse_spec_json('{"method": "draft_model", "draft_model": "/m/draft", "num_speculative_tokens": 3}')
    assert a == b
    assert a.draft_model == "/m/draft"
    assert a.label() == "draft_model K=3"


def test_unknown_key_is_named() -> None:
    msg = spec_error({"method": "ngram", "num_speculative_tokens": 2, "disable_by_batch_size": 4})
    assert "disable_by_batch_size" in msg and "unknown key" in msg
    assert "'num_speculative_token'" in spec_error({"method": "ngram", "num_speculative_token": 2})


def test_not_json_and_not_an_object() -> None:
    with pytest.raises(InputError) as info:
        parse_spec_json("{method: ngram}", where="--spec")
    assert "not valid JSON" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(InputError, match="expected a mapping"):
        parse_spec_json("[1, 2]")


def test_where_prefix_is_used() -> None:
    with pytest.raises(InputError, match=r"^config.yaml spec:"):
        parse_spec_json('{"method": "ngram"}', where="config.yaml spec")


def test_extra_is_passed_through_and_label() -> None:
    spec = parse_spec_json('{"method": "eagle3", "model": "h", "num_speculative_tokens": 5, '
                           '"extra": {"new_knob": 1}}')
    assert spec.extra == {"new_knob": 1}
    dyn = SpecConfig(method="ngram", num_speculative_tokens=4, num_speculative_tokens_per_batch_size=[[1, 8, 4]])
    assert dyn.label() == "ngram K=4 dynamic"


# ---- dynamic K table -----------------------------------------------------------------------------


def dyn(table: Any, k: int = 4) -> dict[str, Any]:
    return {"method": "draft_model", "model": "d", "num_speculative_tokens": k,
            "num_speculative_tokens_per_batch_size": table}


def test_dynamic_k_valid_table() -> None:
    spec = parse_spec_json(json.dumps(dyn([[1, 2, 4], [3, 8, 2], [9, 256, 0]])))
    assert spec.num_speculative_tokens_per_batch_size == [(1, 2, 4), (3, 8, 2), (9, 256, 0)]
    # single range, and K = 0 everywhere, are legal
    parse_spec_json(json.dumps(dyn([[1, 1000, 0]])))


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ([[2, 8, 4]], "must start at 1"),
        ([[0, 8, 4]], "must start at 1"),
        ([[1, 2, 4], [4, 8, 2]], "must start at 3"),  # gap
        ([[1, 4, 4], [3, 8, 2]], "must start at 5"),  # overlap
        ([[1, 2, 5]], "num_speculative_tokens=4"),  # K above K_max
        ([[1, 2, -1]], "[0, num_speculative_tokens=4]"),  # K below 0
        ([[1, 0, 2]], "ends before it starts"),
        ([], "must not be empty"),
    ],
)
def test_dynamic_k_rules(table: Any, needle: str) -> None:
    msg = spec_error(dyn(table))
    assert needle in msg
    assert "num_speculative_tokens_per_batch_size" in msg


def test_dynamic_k_wrong_shape_names_key() -> None:
    assert "num_speculative_tokens_per_batch_size" in spec_error(dyn([[1, 2]]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 50), st.integers(0, 6)), min_size=1, max_size=6), st.integers(1, 6))
def test_dynamic_k_contiguous_tables_accepted_iff_k_in_range(widths_ks: list[tuple[int, int]], k_max: int) -> None:
    table = []
    start = 1
    for width, k in widths_ks:
        table.append((start, start + width - 1, k))
        start += width
    if all(k <= k_max for _, _, k in table):
        validate_dynamic_k(table, k_max)
    else:
        with pytest.raises(ValueError, match="must be in"):
            validate_dynamic_k(table, k_max)


# ---- EngineSpec / LoadSpec -----------------------------------------------------------------------


def test_engine_spec_modes() -> None:
    assert EngineSpec(model="m").launch
    assert not EngineSpec(endpoint="http://h:8000").launch
    with pytest.raises(InputError, match=r"endpoint .* or model"):
        build_model(EngineSpec, {}, "engine")
    with pytest.raises(InputError, match="http://"):
        build_model(EngineSpec, {"endpoint": "localhost:8000"}, "engine")
    with pytest.raises(InputError, match="'port'"):
        build_model(EngineSpec, {"model": "m", "port": 70000}, "engine")


@pytest.mark.parametrize(("levels", "bad"), [([0], 0), ([1, 0, 4], 1), ([-2], 0)])
def test_load_spec_rejects_bad_concurrency(levels: list[int], bad: int) -> None:
    with pytest.raises(ValidationError):
        LoadSpec(concurrency=levels)
    with pytest.raises(InputError) as info:
        build_model(LoadSpec, {"concurrency": levels}, "load")
    msg = str(info.value)
    # the shorthand becomes points: the error names the bad entry's key path exactly
    assert f"key 'points.{bad}.concurrency'" in msg, msg
    assert "\n" not in msg


@pytest.mark.parametrize("raw", [{"concurrency": []}, {"request_rate": []}, {"points": []}])
def test_load_spec_rejects_no_points(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        LoadSpec(**raw)
    with pytest.raises(InputError) as info:
        build_model(LoadSpec, raw, "load")
    msg = str(info.value)
    assert "'points'" in msg and "at least one load point" in msg and "concurrency" in msg, msg


def test_load_spec_defaults_and_bounds() -> None:
    spec = LoadSpec()
    assert spec.points == [ConcurrencyPoint(concurrency=1)] and spec.temperature == 0.0 and spec.api == "chat"
    assert spec.duration_s is None
    assert [p.id for p in LoadSpec(concurrency=[1, 8, 64]).points] == ["c1", "c8", "c64"]
    assert [p.concurrency for p in LoadSpec(concurrency=[1, 8, 64]).points] == [1, 8, 64]  # type: ignore[union-attr]
    for bad in ({"max_tokens": 0}, {"temperature": -0.1}, {"top_p": 0.0}, {"max_error_rate": 1.5}, {"api": "x"},
                {"duration_s": 0}):
        with pytest.raises(InputError) as info:
            build_model(LoadSpec, bad, "load")
        assert repr(next(iter(bad))) in str(info.value)


def test_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    assert LoadSpec().event_loop == "auto"
    assert build_model(LoadSpec, {"event_loop": "asyncio"}, "load").event_loop == "asyncio"
    with pytest.raises(InputError, match=r"'event_loop'"):
        build_model(LoadSpec, {"event_loop": "trio"}, "load")
    monkeypatch.setattr(config, "module_available", lambda name: False)  # a machine without uvloop
    with pytest.raises(InputError) as info:
        build_model(LoadSpec, {"event_loop": "uvloop"}, "load")
    assert "'event_loop'" in str(info.value) and "pip install uvloop" in str(info.value)
    assert build_model(LoadSpec, {"event_loop": "auto"}, "load").event_loop == "auto"
    assert eventloop.loop_factory("auto") is not None  # uvloop is a dependency
    monkeypatch.setattr(eventloop, "module_available", lambda name: False)
    assert eventloop.loop_factory("auto") is None  # asyncio's own loop
    with pytest.raises(InputError, match="pip install uvloop"):
        eventloop.loop_factory("uvloop")


# ---- load points -----------------------------------------------------------------------------------


def test_point_ids_and_labels() -> None:
    assert ConcurrencyPoint(concurrency=4).id == "c4"
    assert ConcurrencyPoint(concurrency=4).slots == 4 and ConcurrencyPoint(concurrency=4).axis == "concurrency"
    assert RatePoint(rate=2.5).id == "r2.5"
    assert RatePoint(rate=2.0).id == "r2"
    assert RatePoint(rate=1, arrival="constant").id == "r1-constant"
    assert RatePoint(rate=1, arrival="gamma", burstiness=0.5, max_concurrency=8).id == "r1-gamma0.5-cap8"
    assert RatePoint(rate=1).slots is None and RatePoint(rate=1, max_concurrency=3).slots == 3
    assert RatePoint(rate=1).axis == "rate"
    # different shapes at one rate are different points
    ids = {RatePoint(rate=1).id, RatePoint(rate=1, arrival="constant").id,
           RatePoint(rate=1, arrival="gamma", burstiness=2).id, RatePoint(rate=1, max_concurrency=2).id}
    assert len(ids) == 4


def test_shorthands_become_points_in_order() -> None:
    spec = LoadSpec(concurrency=[1, 4], request_rate=[2.0, 0.5], arrival="gamma", burstiness=0.5, max_concurrency=8)
    assert spec.points == [
        ConcurrencyPoint(concurrency=1), ConcurrencyPoint(concurrency=4),
        RatePoint(rate=2.0, arrival="gamma", burstiness=0.5, max_concurrency=8),
        RatePoint(rate=0.5, arrival="gamma", burstiness=0.5, max_concurrency=8),
    ]
    # a scalar is a one-point list
    assert LoadSpec(concurrency=4).points == [ConcurrencyPoint(concurrency=4)]
    assert LoadSpec(request_rate=2.0).points == [RatePoint(rate=2.0)]
    # `points` entries: an int is a concurrency, a mapping with `rate` a rate point, `kind` may be omitted
    mixed = build_model(LoadSpec, {"points": [4, {"rate": 2}, {"concurrency": 8}, {"kind": "rate", "rate": 1,
                                                                                "arrival": "constant"}]}, "load")
    assert [p.id for p in mixed.points] == ["c4", "r2", "c8", "r1-constant"]
    assert mixed.point("r2") == RatePoint(rate=2) and mixed.point("c5") is None
    # the shorthands are not fields: a dumped spec reloads to the same points
    assert "concurrency" not in spec.model_dump() and LoadSpec.model_validate(spec.model_dump()) == spec


def test_arrival_flags_over_a_sections_points_shape_each_request_rate_point() -> None:
    """`sweep FILE --arrival gamma --burstiness 0.5` (or `run --config`): the file's rate points take the shape, its
    concurrency points stay as they are; over a section without rate points the flags are refused in one line."""
    file = LoadSpec(concurrency=[2], request_rate=[1.0, 4.0], max_concurrency=8)
    shaped = laid_over(LoadSpec, file, {"arrival": "gamma", "burstiness": 0.5}, "s.yaml: load")
    assert shaped.points == [ConcurrencyPoint(concurrency=2),
                             RatePoint(rate=1.0, arrival="gamma", burstiness=0.5, max_concurrency=8),
                             RatePoint(rate=4.0, arrival="gamma", burstiness=0.5, max_concurrency=8)]
    assert laid_over(LoadSpec, {"points": [{"rate": 2}]}, {"arrival": "constant"}, "load").points == \
        [RatePoint(rate=2, arrival="constant")]
    with pytest.raises(InputError, match="give request_rate too"):
        laid_over(LoadSpec, LoadSpec(concurrency=[1, 4]), {"max_concurrency": 4}, "s.yaml: load")
    with pytest.raises(InputError, match="gamma"):  # a shape the point refuses, named as the point
        laid_over(LoadSpec, file, {"burstiness": 0.5}, "s.yaml: load")


@pytest.mark.parametrize(
    ("raw", "needles"),
    [
        ({"arrival": "gamma"}, ["arrival", "request_rate"]),
        ({"concurrency": [1], "max_concurrency": 4}, ["max_concurrency", "request_rate"]),
        ({"points": [1], "concurrency": [2]}, ["points", "concurrency", "not both"]),
        ({"concurrency": [4, 1, 4]}, ["'points'", "c4", "twice"]),
        ({"request_rate": [2, 2.0]}, ["'points'", "r2", "twice"]),
        ({"request_rate": [1], "burstiness": 0.5}, ["'points.0'", "burstiness", "gamma"]),
        ({"request_rate": [0]}, ["'points.0.rate'"]),
        ({"request_rate": [1], "arrival": "bursty"}, ["'arrival'", "gamma"]),  # the key the section gave
        ({"request_rate": [1], "max_concurrency": 0}, ["'points.0.max_concurrency'"]),
        ({"points": [{"kind": "closed", "concurrency": 2}]}, ["'points.0'", "closed"]),
        ({"points": [{"concurrency": 2, "rate": 1}]}, ["'points.0"]),
    ],
)
def test_load_point_errors_name_the_key(raw: dict[str, Any], needles: list[str]) -> None:
    with pytest.raises(InputError) as info:
        build_model(LoadSpec, raw, "load")
    msg = str(info.value)
    assert msg.startswith("load:") and "\n" not in msg, msg
    for needle in needles:
        assert needle in msg, (needle, msg)


# ---- build_model / load_yaml ---------------------------------------------------------------------


def test_build_model_errors() -> None:
    with pytest.raises(InputError, match=r"^x: expected a mapping of keys to values, got list$"):
        build_model(SpecConfig, [1], "x")
    with pytest.raises(InputError, match=r"^x: expected a mapping of keys to values, got str$"):
        build_model(SpecConfig, "ngram", "x")
    with pytest.raises(InputError) as info:
        build_model(LoadSpec, {"max_tokens": 0, "warmup": -1}, "load")
    assert "(+1 more)" in str(info.value)
    assert build_model(SpecConfig, {"method": "ngram", "num_speculative_tokens": 2}, "x").k == 2


def test_load_yaml_ok(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("spec:\n  method: ngram\n  num_speculative_tokens: 3\nload:\n  concurrency: [1, 4]\n")
    assert load_yaml(p) == {"spec": {"method": "ngram", "num_speculative_tokens": 3}, "load": {"concurrency": [1, 4]}}
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_yaml(empty) == {}


@pytest.mark.parametrize(
    "body",
    [
        "spec: !!python/object:collections.OrderedDict {}\n",
        "x: !!python/object/apply:os.getcwd []\n",
        "!!python/object/new:builtins.dict {}\n",
        "x: !!python/name:os.system\n",
    ],
)
def test_load_yaml_is_safe(tmp_path: Path, body: str) -> None:
    p = tmp_path / "evil.yaml"
    p.write_text(body)
    with pytest.raises(InputError) as info:
        load_yaml(p)
    assert str(p) in str(info.value) and "\n" not in str(info.value)


def test_load_yaml_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: 1\nb: [unclosed\n")
    with pytest.raises(InputError, match=r"line \d+: not valid YAML"):
        load_yaml(bad)
    top_list = tmp_path / "list.yaml"
    top_list.write_text("- 1\n- 2\n")
    with pytest.raises(InputError, match="top level must be a mapping"):
        load_yaml(top_list)
