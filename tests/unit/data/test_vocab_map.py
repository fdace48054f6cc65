"""Reading a draft vocabulary from the files users have: EAGLE-3's d2t / t2d in safetensors (written here by the
safetensors library itself, so the reader is checked against the format, not against its own idea of it), .npy
and .json lists; the top N of a corpus; and a one-line error, naming the file and the fix, for each bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from specmeter.common.errors import InputError
from specmeter.data.vocab_map import read_vocab_map, top_n

TARGET_VOCAB = 32
CHOSEN = np.array([0, 1, 5, 6, 7, 20, 31])


def d2t_of(ids: np.ndarray) -> np.ndarray:
    """EAGLE-3's layout: draft index i stands for target id i + d2t[i]."""
    return (ids - np.arange(ids.size)).astype(np.int64)


def t2d_of(ids: np.ndarray, size: int = TARGET_VOCAB) -> np.ndarray:
    mask = np.zeros(size, dtype=bool)
    mask[ids] = True
    return mask


def test_d2t_and_t2d_in_a_checkpoint_beside_weights(tmp_path: Path) -> None:
    weights = np.ones((4, 3), dtype=np.float32)
    save_file({"fc.weight": weights, "d2t": d2t_of(CHOSEN), "t2d": t2d_of(CHOSEN)}, str(tmp_path / "model.safetensors"))
    got = read_vocab_map(tmp_path / "model.safetensors", TARGET_VOCAB)
    assert got.kind == "d2t" and list(got.ids) == list(CHOSEN) and not got.notes
    # A draft model directory is searched for the file that holds the map.
    assert list(read_vocab_map(tmp_path, TARGET_VOCAB).ids) == list(CHOSEN)


def test_t2d_alone_and_prefixed_names(tmp_path: Path) -> None:
    save_file({"model.t2d": t2d_of(CHOSEN)}, str(tmp_path / "t2d.safetensors"))
    got = read_vocab_map(tmp_path / "t2d.safetensors", TARGET_VOCAB)
    assert got.kind == "t2d" and list(got.ids) == list(CHOSEN)


def test_d2t_and_t2d_that_disagree_use_d2t_and_say_so(tmp_path: Path) -> None:
    save_file({"d2t": d2t_of(CHOSEN), "t2d": t2d_of(CHOSEN[:-1])}, str(tmp_path / "m.safetensors"))
    got = read_vocab_map(tmp_path / "m.safetensors", TARGET_VOCAB)
    assert list(got.ids) == list(CHOSEN) and "disagree" in got.notes[0]


def test_lists_of_ids(tmp_path: Path) -> None:
    np.save(tmp_path / "ids.npy", CHOSEN[::-1])
    np.save(tmp_path / "mask.npy", t2d_of(CHOSEN))
    (tmp_path / "ids.json").write_text(json.dumps([int(i) for i in CHOSEN] + [5]))
    (tmp_path / "d2t.json").write_text(json.dumps({"d2t": d2t_of(CHOSEN).tolist()}))
    for name in ("ids.npy", "mask.npy", "ids.json", "d2t.json"):
        got = read_vocab_map(tmp_path / name, TARGET_VOCAB)
        assert list(got.ids) == list(CHOSEN), name
    assert read_vocab_map(tmp_path / "ids.json", TARGET_VOCAB).notes  # the repeated 5 is said


def test_mask_membership() -> None:
    got = top_n(np.bincount([3, 3, 3, 1, 1, 2]), 2, "corpus")
    mask = got.mask(8)
    assert mask.sum() == 2 and mask[3] and mask[1] and not mask[2]


def test_top_n_ties_to_the_lower_id_and_says_when_the_corpus_is_short() -> None:
    counts = np.bincount([4, 4, 2, 2, 7, 9])  # 4 and 2 twice, 7 and 9 once
    assert list(top_n(counts, 3, "c").ids) == [2, 4, 7]
    short = top_n(counts, 10, "c")
    assert short.size == 4 and "only 4 distinct" in short.notes[0]


@pytest.mark.parametrize(("files", "name", "message"), [
    ({"m.safetensors": {"fc.weight": np.ones(3, dtype=np.float32)}}, "m.safetensors", "no d2t or t2d"),
    ({"m.safetensors": {"t2d": t2d_of(CHOSEN, 40)}}, "m.safetensors", "another target"),
    ({"m.safetensors": {"d2t": np.zeros(4, dtype=np.int64) + 1 - np.arange(4)}}, "m.safetensors", "already taken"),
    ({"ids.npy": np.array([1, 2, 99])}, "ids.npy", "out of range"),
    ({"ids.npy": np.ones((2, 2), dtype=np.int64)}, "ids.npy", "1-D"),
    ({"ids.csv": "1,2,3"}, "ids.csv", "unknown format"),
    ({"bad.safetensors": "not a header"}, "bad.safetensors", "not a readable safetensors"),
    ({}, "missing.npy", "no such file"),
])
def test_bad_maps_are_one_line_errors_naming_the_file(tmp_path: Path, files: dict[str, object], name: str,
                                                      message: str) -> None:
    for file, content in files.items():
        path = tmp_path / file
        if isinstance(content, dict):
            save_file(content, str(path))
        elif isinstance(content, np.ndarray):
            np.save(path, content)
        else:
            path.write_text(str(content))
    with pytest.raises(InputError) as err:
        read_vocab_map(tmp_path / name, TARGET_VOCAB)
    text = str(err.value)
    assert message in text and name in text and "\n" not in text


def test_top_n_needs_a_positive_size() -> None:
    with pytest.raises(InputError, match="--top 0"):
        top_n(np.bincount([1, 2]), 0, "c")
