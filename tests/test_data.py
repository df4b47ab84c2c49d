from __future__ import annotations

import json

import pytest

from bertprobe.data import Dataset, DataSpec, Example, align_labels, load_table, subsample
from bertprobe.errors import DataError


def test_tsv_with_bare_quotes_keeps_them(sst_tsv):
    data = load_table(DataSpec(path=str(sst_tsv), text="sentence"))
    assert len(data) == 6
    assert data.examples[1].text == 'a "great" film'
    assert [ex.label for ex in data.examples] == [1, 1, 0, 0, 1, 0]


def test_default_text_column_and_columns_by_index(sst_tsv):
    assert load_table(DataSpec(path=str(sst_tsv))).examples[0].text == "the movie was good"
    data = load_table(DataSpec(path=str(sst_tsv), text=0, label=1))
    assert data.examples[2].text == "the plot was awful" and data.examples[2].label == 0


def test_jsonl_pairs_and_choices(tmp_path):
    path = tmp_path / "d.jsonl"
    rows = [{"p": "a dog", "h": "an animal", "y": "yes", "c0": "x", "c1": "y"}]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    data = load_table(DataSpec(path=str(path), text="p", text_pair="h", label="y", choices=("c0", "c1")))
    ex = data.examples[0]
    assert (ex.text, ex.text_pair, ex.label, ex.choices) == ("a dog", "an animal", "yes", ("x", "y"))


def test_missing_empty_and_bad_columns(tmp_path, sst_tsv):
    with pytest.raises(DataError, match="does not exist"):
        load_table(DataSpec(path=str(tmp_path / "nope.tsv")))
    (tmp_path / "empty.tsv").write_text("")
    with pytest.raises(DataError, match="is empty"):
        load_table(DataSpec(path=str(tmp_path / "empty.tsv")))
    (tmp_path / "header.tsv").write_text("sentence\tlabel\n")
    with pytest.raises(DataError, match="no rows"):
        load_table(DataSpec(path=str(tmp_path / "header.tsv")))
    with pytest.raises(DataError, match=r"no column 'sentense' for text \(did you mean 'sentence'\?\)"):
        load_table(DataSpec(path=str(sst_tsv), text="sentense"))
    with pytest.raises(DataError, match="no column 'gold' for label"):
        load_table(DataSpec(path=str(sst_tsv), label="gold"))
    with pytest.raises(DataError, match="out of range"):
        load_table(DataSpec(path=str(sst_tsv), text=7))


def test_hub_dataset_offline_is_one_clear_error():
    with pytest.raises(DataError, match="pass --data PATH"):
        load_table(DataSpec(path="nyu-mll/glue", config="sst2"))


def test_seeded_sampling_is_reproducible_and_ordered():
    data = Dataset([Example(str(i), label=0) for i in range(100)])
    a = subsample(data, 10, "random", seed=1)
    b = subsample(data, 10, "random", seed=1)
    c = subsample(data, 10, "random", seed=2)
    ids = [int(e.text) for e in a.examples]
    assert ids == [int(e.text) for e in b.examples] and ids == sorted(ids)
    assert ids != [int(e.text) for e in c.examples]
    assert [e.text for e in subsample(data, 3, "first", 0).examples] == ["0", "1", "2"]
    assert subsample(data, None, "random", 0) is data


def test_align_labels_by_name_index_and_classlabel():
    data = Dataset([Example("a", label="POSITIVE"), Example("b", label=0), Example("c", label="1")], name="d")
    assert align_labels(data, ["negative", "positive"]).labels() == [1, 0, 1]
    # a hub ClassLabel whose names are in the other order is re-mapped by name
    hub = Dataset([Example("a", label=0)], name="h", label_names=["positive", "negative"])
    assert align_labels(hub, ["negative", "positive"]).labels() == [1]
    with pytest.raises(DataError, match=r"label 'neutral' on row 1 of d is not one the model knows \(negative, positive\)"):
        align_labels(Dataset([Example("a", label="neutral")], name="d"), ["negative", "positive"])
    with pytest.raises(DataError, match="label 5"):
        align_labels(Dataset([Example("a", label=5)], name="d"), ["negative", "positive"])


def test_na_like_text_stays_text(tmp_path):
    path = tmp_path / "na.tsv"
    path.write_text("sentence\tlabel\nNA\t1\nnull\t0\n")
    assert [ex.text for ex in load_table(DataSpec(path=str(path))).examples] == ["NA", "null"]
    csv_path = tmp_path / "d.csv"
    csv_path.write_text('sentence,label\n"a, quoted ""film""",1\nNone,0\n')
    assert [ex.text for ex in load_table(DataSpec(path=str(csv_path))).examples] == ['a, quoted "film"', "None"]


def test_a_labels_column_is_the_default_label_where_no_label_column_is(tmp_path):
    rows = [{"text": "Ann met Bo", "labels": ["PER"]}, {"text": "rain", "labels": []}]
    path = tmp_path / "sets.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = load_table(DataSpec(path=str(path)))  # no label named: the documented multi-label form is read
    assert [ex.label for ex in data.examples] == [["PER"], []]
    both = tmp_path / "both.jsonl"  # a 'label' column stays the default where there is one
    both.write_text(json.dumps({"text": "x", "label": "a", "labels": ["b"]}) + "\n")
    assert load_table(DataSpec(path=str(both))).examples[0].label == "a"
    with pytest.raises(DataError, match="no column 'label'"):  # a label column a suite names must exist
        load_table(DataSpec(path=str(path), label="label", named=frozenset({"label"})))


def test_a_pair_classifiers_question_context_label_table_is_not_read_as_qa(tmp_path):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("question,context,label\nIs it wet?,It rains.,yes\n", encoding="utf-8")
    data = load_table(DataSpec(path=str(pairs), text="question", text_pair="context", named=frozenset({"text", "text_pair"})))
    assert data.examples[0].label == "yes" and data.examples[0].text_pair == "It rains."
    plain = load_table(DataSpec(path=str(pairs)))  # nothing named: a label column and no answer column, so not QA
    assert plain.examples[0].label == "yes"
