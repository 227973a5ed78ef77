"""Loading prompt sets: every format, field mappings, errors that name file and line."""

from __future__ import annotations

import json

import pytest

from rlvr.data import DATASETS, FIELD_MAPS, Example, FieldMap, load_examples

MATH500_ROWS = [
    {
        "problem": "What is $1+1$?",
        "solution": "...",
        "answer": "2",
        "subject": "Algebra",
        "level": 1,
        "unique_id": "test/algebra/1.json",
    },
    {
        "problem": "Simplify $6/8$.",
        "solution": "...",
        "answer": "\\frac{3}{4}",
        "subject": "Prealgebra",
        "level": 2,
        "unique_id": "test/prealgebra/7.json",
    },
]
DAPO_ROW = {
    "data_source": "math_dapo",
    "prompt": [{"content": "Solve ... Answer: $Answer\n\nWhat is 2+3?", "role": "user"}],
    "ability": "MATH",
    "reward_model": {"ground_truth": "5", "style": "rule"},
    "extra_info": {"index": "a1b2"},
}


def write_jsonl(path, rows, extra_lines=()):
    lines = [json.dumps(r) for r in rows] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_jsonl_default_mapping_skips_blank_lines(tmp_path):
    path = write_jsonl(tmp_path / "set.jsonl", [{"prompt": "1+1?", "answer": "2"}], ["", "  "])
    path.write_text(path.read_text() + json.dumps({"prompt": "2+2?", "answer": 4}) + "\n")
    examples = load_examples(str(path))
    assert examples == [
        Example(prompt="1+1?", reference="2", id="set-0", dataset="set"),
        Example(prompt="2+2?", reference=4, id="set-1", dataset="set"),
    ]


def test_json_array_file(tmp_path):
    path = tmp_path / "set.json"
    path.write_text(json.dumps([{"prompt": "a", "answer": "1"}, {"prompt": "b", "answer": "2"}]))
    assert [e.reference for e in load_examples(str(path))] == ["1", "2"]


def test_named_mapping_math500_on_a_local_copy(tmp_path):
    path = write_jsonl(tmp_path / "math500.jsonl", MATH500_ROWS)
    examples = load_examples(str(path), fields="math500", template="{prompt} Box it.")
    assert examples[1].id == "test/prealgebra/7.json"
    assert examples[1].prompt == "Simplify $6/8$. Box it."
    assert examples[1].reference == "\\frac{3}{4}"
    assert examples[1].metadata == {"subject": "Prealgebra", "level": 2}


def test_dapo_mapping_reads_nested_fields_and_chat_prompts(tmp_path):
    path = write_jsonl(tmp_path / "dapo.jsonl", [DAPO_ROW])
    (example,) = load_examples(str(path), fields="dapo-math")
    assert example.prompt == DAPO_ROW["prompt"]
    assert example.reference == "5" and example.id == "a1b2"


def test_custom_field_map_and_limit(tmp_path):
    rows = [{"q": {"text": f"p{i}"}, "gold": str(i), "key": i} for i in range(5)]
    path = write_jsonl(tmp_path / "custom.jsonl", rows)
    fields = FieldMap(prompt="q.text", answer="gold", id="key")
    examples = load_examples(str(path), fields=fields, limit=2, name="mine")
    assert [(e.prompt, e.reference, e.id, e.dataset) for e in examples] == [
        ("p0", "0", "0", "mine"),
        ("p1", "1", "1", "mine"),
    ]


def test_unique_drops_repeated_prompts_before_the_limit(tmp_path):
    rows = [{"prompt": p, "answer": str(i)} for i, p in enumerate(["a", "a", "b", "a", "c"])]
    path = write_jsonl(tmp_path / "dup.jsonl", rows)
    assert [e.id for e in load_examples(str(path), unique=True)] == ["dup-0", "dup-2", "dup-4"]
    assert [e.prompt for e in load_examples(str(path), unique=True, limit=2)] == ["a", "b"]
    assert len(load_examples(str(path))) == 5


def test_tests_and_row_references(tmp_path):
    row = {"question": "print 1", "input_output": {"inputs": [""], "outputs": ["1\n"]}}
    path = write_jsonl(tmp_path / "code.jsonl", [row])
    (ex,) = load_examples(
        str(path),
        fields=FieldMap(prompt="question", answer=None, tests="input_output", reference="tests"),
    )
    assert ex.reference == row["input_output"]
    (ex,) = load_examples(str(path), fields=FieldMap(prompt="question", reference="row"))
    assert ex.reference == row


def test_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "aime.parquet"
    pq.write_table(
        pa.Table.from_pylist(
            [{"id": 60, "problem": "Find x.", "answer": "204", "url": "u", "year": "2024"}]
        ),
        path,
    )
    (ex,) = load_examples(str(path), fields="aime2024")
    assert (ex.prompt, ex.reference, ex.id, ex.dataset) == ("Find x.", "204", "60", "aime")


def test_datasets_directory_and_save_to_disk(tmp_path):
    import datasets

    data_dir = tmp_path / "amc"
    data_dir.mkdir()
    write_jsonl(data_dir / "test.jsonl", [{"id": 0, "question": "Q?", "answer": 27.0, "url": "u"}])
    (ex,) = load_examples(str(data_dir), fields="amc23", split="test")
    assert (ex.prompt, ex.reference, ex.id) == ("Q?", 27.0, "0")

    saved = tmp_path / "saved"
    datasets.DatasetDict({"test": datasets.Dataset.from_list(MATH500_ROWS)}).save_to_disk(
        str(saved)
    )
    examples = load_examples(str(saved), fields="math500", split="test")
    assert [e.reference for e in examples] == ["2", "\\frac{3}{4}"]
    with pytest.raises(ValueError, match="no split 'train'"):
        load_examples(str(saved), fields="math500", split="train")


def test_malformed_jsonl_names_file_and_line(tmp_path):
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [{"prompt": "a", "answer": "1"}],
        ['{"prompt": "b", "answer": ', '{"prompt": "c"}'],
    )
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: invalid JSON"):
        load_examples(str(path))


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_cut_off_string_reads_starting_at_column_once(tmp_path, suffix):
    """It read 'Unterminated string starting at at column 12' (json's message ends in 'at')."""
    path = tmp_path / f"cut{suffix}"
    path.write_text(('[{"prompt": "a"},\n' if suffix == ".json" else "") + ' {"prompt": "b')
    with pytest.raises(ValueError) as err:
        load_examples(str(path))
    line = 2 if suffix == ".json" else 1
    assert str(err.value) == (
        f"{path}:{line}: invalid JSON (Unterminated string starting at column 13)"
    )


def test_bytes_that_are_not_utf8_name_file_and_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"prompt": "a", "answer": "1"}\n{"prompt": "caf\xe9", "answer": "2"}\n')
    with pytest.raises(
        ValueError, match=r"latin1\.jsonl:2: not UTF-8 text \(byte 0xe9 at byte 16\)"
    ):
        load_examples(str(path))


def test_a_compressed_file_is_named_with_the_tool_that_unpacks_it(tmp_path):
    """A gzipped file named .jsonl said only ``not UTF-8 text (byte 0x8b at byte 2)``, and a
    .jsonl.gz only which suffixes are read."""
    import gzip

    rows = b'{"prompt": "a", "answer": "1"}\n'
    (tmp_path / "rows.jsonl").write_bytes(gzip.compress(rows))
    (tmp_path / "rows.jsonl.gz").write_bytes(gzip.compress(rows))
    with pytest.raises(ValueError) as err:
        load_examples(str(tmp_path / "rows.jsonl"))
    assert str(err.value).endswith(
        "rows.jsonl:1: not UTF-8 text (byte 0x8b at byte 2); it is gzip-compressed: unpack it "
        "first (gunzip)"
    )
    with pytest.raises(ValueError) as err:
        load_examples(str(tmp_path / "rows.jsonl.gz"))
    assert str(err.value).endswith(".gz is compressed: unpack it first, gunzip)")


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_byte_order_mark_is_not_data(tmp_path, suffix):
    path = tmp_path / f"bom{suffix}"
    rows = (
        '[{"prompt": "a", "answer": "1"}]'
        if suffix == ".json"
        else '{"prompt": "a", "answer": "1"}'
    )
    path.write_bytes(b"\xef\xbb\xbf" + rows.encode())
    assert [e.prompt for e in load_examples(str(path))] == ["a"]


def test_missing_field_names_field_and_line(tmp_path):
    path = write_jsonl(tmp_path / "set.jsonl", [{"problem": "a", "answer": "1"}, {"problem": "b"}])
    with pytest.raises(ValueError, match=r"set\.jsonl:2: missing field 'answer'.*has: problem"):
        load_examples(str(path), fields=FieldMap(prompt="problem"))
    with pytest.raises(ValueError, match=r"set\.jsonl:1: missing field 'prompt'"):
        load_examples(str(path))


@pytest.mark.parametrize("answer", [None, "", "  "])
def test_an_empty_answer_names_field_and_line(tmp_path, answer):
    # Every completion would score wrong against it: the run would learn nothing, silently.
    path = write_jsonl(
        tmp_path / "set.jsonl", [{"prompt": "a", "answer": "1"}, {"prompt": "b", "answer": answer}]
    )
    with pytest.raises(ValueError, match=r"set\.jsonl:2: field 'answer' \(the answer\) is empty"):
        load_examples(str(path))


def test_missing_nested_field_in_parquet_names_the_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "dapo.parquet"
    row = {**DAPO_ROW, "reward_model": {"style": "rule"}}
    pq.write_table(pa.Table.from_pylist([row]), path)
    with pytest.raises(
        ValueError, match=r"dapo\.parquet row 0: missing field 'reward_model\.ground_truth'"
    ):
        load_examples(str(path), fields="dapo-math")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"prompt": 3, "answer": "1"}', "prompt must be"),
        ('{"prompt": [{"role": "user"}], "answer": "1"}', "prompt must be"),
        ('{"prompt": "  ", "answer": "1"}', "prompt must be"),
    ],
)
def test_bad_rows(tmp_path, line, message):
    path = write_jsonl(tmp_path / "rows.jsonl", [{"prompt": "ok", "answer": "1"}], [line])
    with pytest.raises(ValueError, match=rf"rows\.jsonl:2: {message}"):
        load_examples(str(path))


def test_a_csv_file_is_told_how_to_convert(tmp_path):
    """A .csv file was refused with the supported types only; the error now says how to
    convert one (answers kept as text, so `007` stays `007`), and the command works."""
    path = tmp_path / "qs.csv"
    path.write_text("prompt,answer\n1 + 1 =,007\n")
    with pytest.raises(ValueError) as err:
        load_examples(str(path))
    command = str(err.value).split("(pandas: ", 1)[1].removesuffix(")")
    assert command == "read_csv(path, dtype=str).to_json(out, orient='records', lines=True)"
    pd = pytest.importorskip("pandas")
    out = tmp_path / "qs.jsonl"
    pd.read_csv(path, dtype=str).to_json(out, orient="records", lines=True)
    assert [e.reference for e in load_examples(str(out))] == ["007"]


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        load_examples(str(tmp_path / "missing.jsonl"))
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="unsupported file type"):
        load_examples(str(tmp_path / "x.csv"))
    with pytest.raises(ValueError, match="unknown field mapping 'nope'.*math500"):
        load_examples(str(write_jsonl(tmp_path / "a.jsonl", [{"prompt": "a"}])), fields="nope")
    with pytest.raises(ValueError, match="needs a tests field"):
        FieldMap(reference="tests")
    with pytest.raises(ValueError, match="must contain"):
        load_examples(
            str(tmp_path / "a.jsonl"),
            fields=FieldMap(answer=None, reference="row"),
            template="no slot",
        )


def test_a_folder_mixing_kinds_of_row_files_is_refused(tmp_path):
    """A folder with a.jsonl and b.csv loaded a.jsonl's rows only, b.csv dropped unsaid."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", [{"prompt": "1 + 1 =", "answer": "2"}])
    (folder / "b.csv").write_text("prompt,answer\n2 + 2 =,4\n")
    with pytest.raises(ValueError, match=r"mixed: holds \.csv and \.jsonl files; only one kind"):
        load_examples(str(folder))
    (folder / "b.csv").unlink()
    write_jsonl(folder / "b.ndjson", [{"prompt": "2 + 2 =", "answer": "4"}])  # one reader: both
    (folder / "notes.txt").write_text("not a row file\n")
    assert [e.reference for e in load_examples(str(folder))] == ["2", "4"]


def test_a_local_folder_s_error_does_not_blame_the_offline_hub(tmp_path, monkeypatch):
    """A split a local folder lacks ended in "(HF_HUB_OFFLINE is set: give a local file or
    directory)", about a local directory."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    folder = tmp_path / "data"
    folder.mkdir()
    write_jsonl(folder / "test.jsonl", [{"prompt": "1 + 1 =", "answer": "2"}])
    with pytest.raises(ValueError, match="split 'validation'") as err:
        load_examples(str(folder), split="validation")
    assert "HF_HUB_OFFLINE" not in str(err.value)


def test_a_path_under_the_home_folder_loads_as_the_preflight_check_finds_it(tmp_path, monkeypatch):
    """``~/x.jsonl`` (YAML configs and ``key=value`` overrides reach us unexpanded) passes
    ``check_source``, so loading must read the same file."""
    from rlvr.data import check_source

    monkeypatch.setenv("HOME", str(tmp_path))
    write_jsonl(tmp_path / "home.jsonl", [{"prompt": "1+1?", "answer": "2"}])
    check_source("~/home.jsonl")
    assert [e.reference for e in load_examples("~/home.jsonl")] == ["2"]


def test_named_datasets_use_their_mappings():
    assert DATASETS["aime2025"].configs == ("AIME2025-I", "AIME2025-II")
    for spec in DATASETS.values():
        assert spec.fields in FIELD_MAPS


@pytest.mark.parametrize("name", ["math500", "aime2024", "aime2025", "amc23"])
def test_a_named_math_set_asks_for_a_boxed_answer(name, monkeypatch):
    """The template ended in `\\boxed{{}}.` (format-string braces, never formatted): every
    named math set's prompt asked for an answer in doubled braces."""
    import rlvr.data.loading

    row = {"problem": "What is 1 + 1?", "question": "What is 1 + 1?", "answer": "2", "id": 0}
    row |= {"unique_id": "u0"}
    monkeypatch.setattr(rlvr.data.loading, "read_hf", lambda *a, **k: iter([("hub row 0", row)]))
    (example,) = load_examples(name)
    assert example.prompt == (
        "What is 1 + 1?\n\nPlease reason step by step, and put your final answer within \\boxed{}."
    )


def test_code_benchmark_rows_reach_the_code_verifier_whole(tmp_path):
    from rlvr.rewards.code import parse_reference

    humaneval = {
        "task_id": "HumanEval/53",
        "prompt": 'def add(x: int, y: int):\n    """Add two numbers."""\n',
        "canonical_solution": "    return x + y\n",
        "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
        "entry_point": "add",
    }
    mbpp = {
        "task_id": 17,
        "text": "Write a function to find the perimeter of a square.",
        "code": "def square_perimeter(a):\n  return 4*a",
        "test_list": ["assert square_perimeter(10)==40"],
        "test_setup_code": "",
        "challenge_test_list": [],
    }
    for name, row in (("humaneval", humaneval), ("mbpp", mbpp)):
        path = write_jsonl(tmp_path / f"{name}.jsonl", [row])
        (example,) = load_examples(str(path), fields=name)
        assert example.reference == row and example.id == str(row["task_id"])
        assert parse_reference(example.reference).style == "assert"
    assert (
        humaneval["prompt"]
        == load_examples(str(tmp_path / "humaneval.jsonl"), fields="humaneval")[0].prompt
    )


def test_a_pandas_column_object_is_named_as_such(tmp_path):
    """`df.to_json("x.json")` (pandas' default, one object of columns) was read as one row and
    refused for its prompt being a dict, with no word of what the file holds."""
    columns = {"prompt": {"0": "1 + 1 =", "1": "2 + 2 ="}, "answer": {"0": "2", "1": "4"}}
    path = tmp_path / "frame.json"
    path.write_text(json.dumps(columns))
    with pytest.raises(ValueError, match=r"frame.json: holds one JSON object of columns .*"
                       r"orient='records', lines=True\)$"):  # fmt: skip
        load_examples(str(path))
    nested = {"prompt": {"text": "1 + 1 ="}, "answer": {"value": "2"}}  # one row, nested fields
    path.write_text(json.dumps(nested))
    fields = FieldMap(prompt="prompt.text", answer="answer.value")
    assert [e.reference for e in load_examples(str(path), fields=fields)] == ["2"]


def test_a_pretty_printed_single_object_is_named_as_such(tmp_path):
    """It read as JSON Lines and failed with 'invalid JSON (Expecting property name ...)' at line 1."""
    path = tmp_path / "one.json"
    path.write_text('{\n  "prompt": "1 + 1",\n  "answer": "2"\n}\n')
    with pytest.raises(ValueError, match=r"one.json: holds one JSON object over several lines"):
        load_examples(str(path))
    path.write_text('{"prompt": "1 + 1", "answer": "2"}\n')  # one row on one line: JSON Lines
    assert [e.reference for e in load_examples(str(path))] == ["2"]


def test_rows_as_rlvr_data_gen_writes_them_load_without_naming_their_mapping(tmp_path):
    """A file `rlvr data gen` wrote (reasoning-gym rows: id, question, answer, metadata; code
    tasks: id, question, tests, family, level, key) given without `data.fields` stopped on the
    missing `prompt` field, the error saying to add `data.fields=reasoning_gym`. Such rows are
    recognised and load with their mapping; a named mapping still wins, and ordinary question /
    answer rows are not taken for them."""
    from rlvr.data.code_tasks import code_task_rows
    from rlvr.data.gym import write_jsonl

    gym = {"id": "c-0-0", "question": "1 + 1 =", "answer": "2",
           "metadata": {"source_dataset": "chain_sum", "source_index": 0}}  # fmt: skip
    path = tmp_path / "gen.jsonl"
    write_jsonl([gym, {**gym, "id": "c-0-1"}], path)
    examples = load_examples(str(path))
    assert examples == load_examples(str(path), fields="reasoning_gym")
    assert examples[0].reference == gym and examples[1].id == "c-0-1"
    code = tmp_path / "code.jsonl"
    write_jsonl(code_task_rows("all", size=2, seed=0), code)
    assert load_examples(str(code)) == load_examples(str(code), fields="code_tasks")
    assert set(load_examples(str(code))[0].reference) == {"fn_name", "inputs", "outputs"}
    with pytest.raises(
        ValueError, match="as rlvr data gen writes: use the field mapping reasoning_gym"
    ):
        load_examples(str(path), fields=FieldMap(prompt="problem"))  # other fields: named
    plain = {"id": "q1", "question": "1 + 1 =", "answer": "2", "metadata": {"level": 1}}
    write_jsonl([plain], path)  # no source_dataset: not a reasoning-gym row
    with pytest.raises(ValueError, match="missing field 'prompt'"):
        load_examples(str(path))
    write_jsonl([{**gym, "prompt": "Q: 1 + 1 ="}], path)  # the default mapping reads it
    assert load_examples(str(path))[0].reference == "2"
    write_jsonl([{key: v for key, v in gym.items() if key != "id"}], path)
    with pytest.raises(ValueError, match="missing field 'prompt'"):
        load_examples(str(path))  # not as rlvr data gen writes it (no id)


def test_a_hub_set_unreachable_offline_says_so(monkeypatch, hub_cache):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    told = "HF_HUB_OFFLINE is set and the Hugging Face cache has no copy: give a local file or"
    with pytest.raises(ValueError, match=told):
        load_examples("rlvr-no-such-org/no-such-set")


def test_a_split_or_config_a_cached_hub_set_lacks_is_not_told_it_is_uncached(hub_cache):
    """Offline, `data.split=validation` of a cached hub set (or an uncached config of a named
    set) ended in "(HF_HUB_OFFLINE is set: give a local file or directory); named sets: ...",
    as if the set were not there or misspelt; the error is datasets' own (the splits it has,
    the configs the cache has)."""
    rows = "".join(json.dumps(row) + "\n" for row in MATH500_ROWS).encode()
    hub_cache.dataset("org/ds", {"train.jsonl": rows, "test.jsonl": rows})
    with pytest.raises(ValueError) as err:
        load_examples("org/ds", split="validation")
    assert str(err.value) == (
        "could not load dataset 'org/ds' (config None, split 'validation'): Unknown split "
        "\"validation\". Should be one of ['train', 'test']."
    )
    readme = "---\nconfigs:\n" + "".join(
        f"- config_name: {c}\n  data_files:\n  - split: test\n    path: {c}.jsonl\n"
        for c in ("AIME2025-I", "AIME2025-II")
    )
    aime = b'{"question": "What is 1 + 1?", "answer": "2"}\n'
    # an online load of AIME2025-I fetched its file alone
    files = {"README.md": f"{readme}---\n".encode(), "AIME2025-I.jsonl": aime}
    hub_cache.dataset("opencompass/AIME2025", files, configs=("AIME2025-I",))
    with pytest.raises(ValueError) as err:
        load_examples("aime2025")
    assert "config 'AIME2025-II'" in str(err.value)
    assert "Available configs in the cache: ['AIME2025-I']" in str(err.value)
    assert "HF_HUB_OFFLINE" not in str(err.value) and "named sets" not in str(err.value)


def test_an_offline_load_from_the_cache_does_not_say_it_reads_the_cache(
    hub_cache, caplog, monkeypatch
):
    """Each offline load of a cached hub set (and each look at its splits) logged two lines of
    `datasets`, "Using the latest cached version of the dataset since org/ds couldn't be found
    on the Hugging Face Hub (offline mode is enabled)." and "Found the latest cached dataset
    configuration ...": noise when HF_HUB_OFFLINE was set on purpose. They are gone; another
    warning of `datasets` is not, and a set the cache lacks is still one line."""
    import logging

    from huggingface_hub import constants

    from rlvr.data.loading import quiet_offline_cache, source_splits

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    rows = "".join(json.dumps(row) + "\n" for row in MATH500_ROWS).encode()
    hub_cache.dataset("org/ds", {"train.jsonl": rows, "test.jsonl": rows})
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert len(load_examples("org/ds", fields="math500", split="test")) == 2
        assert source_splits("org/ds") == ["train", "test"]
        with quiet_offline_cache():
            logging.getLogger("datasets.load").warning("a real warning")
    said = [record.getMessage() for record in caplog.records]
    assert said == ["a real warning"]
    with pytest.raises(ValueError) as err:
        load_examples("org/no-such-set")
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("could not load dataset 'org/no-such-set' (config None, ")


def test_a_hub_set_downloaded_without_datasets_loads_offline(hub_cache):
    """A hub set fetched with `huggingface-cli download` (its files in the Hugging Face cache,
    no tables `datasets` built) was refused offline as not reachable: `datasets` reads only
    its own tables offline. rlvr reads the cached files, with their configs and splits."""
    rows = "".join(json.dumps(row) + "\n" for row in MATH500_ROWS).encode()
    readme = b"---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: t.jsonl\n---\n"
    hub_cache.dataset(
        "HuggingFaceH4/MATH-500", {"README.md": readme, "t.jsonl": rows}, configs=None
    )
    examples = load_examples("math500")
    assert [e.reference for e in examples] == ["2", "\\frac{3}{4}"]
    assert examples[0].id == "test/algebra/1.json" and examples[0].dataset == "math500"
    with pytest.raises(ValueError, match=r"Unknown split \"train\". Should be one of \['test'\]"):
        load_examples("math500", split="train")


def test_a_misspelt_named_set_is_told_the_named_sets():
    """'MATH500' was only 'could not load dataset ... on the Hub', read as a network problem."""
    with pytest.raises(ValueError, match=r"did you mean math500\? named sets: aime2024, .*mbpp$"):
        load_examples("MATH500", split="test")
    with pytest.raises(ValueError, match="did you mean aime2024"):
        load_examples("aime24")


@pytest.mark.parametrize("name", ["train.csv", "data/train.tsv", "./rows"])
def test_a_missing_file_is_a_missing_file_not_a_hub_dataset(name, tmp_path, monkeypatch):
    """``data.train=train.csv`` that does not exist said the hub could not be reached."""
    from rlvr.data import check_source

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=rf"^{name}: no such file"):
        check_source(name)
    with pytest.raises(ValueError, match=rf"^{name}: no such file"):
        load_examples(name)


def test_a_split_on_one_file_is_refused(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps({"prompt": "1+1?", "answer": "2"}) + "\n")
    assert len(load_examples(str(path))) == 1
    with pytest.raises(ValueError, match="one file has no splits; split 'test' is for folders"):
        load_examples(str(path), split="test")  # it read every row as the test split


def test_a_split_other_than_a_saved_dataset_s_own_is_refused(tmp_path):
    """A `Dataset.save_to_disk` folder holds one split; asked for another (`--split test` on a
    saved train split) it was read whole as that split, so training rows were scored as
    held-out ones. Its own split, no split, or a dataset that records none still load."""
    import datasets

    for split in ("train", None):
        datasets.Dataset.from_list(MATH500_ROWS, split=split).save_to_disk(
            str(tmp_path / str(split))
        )
    with pytest.raises(
        ValueError, match=r"a saved dataset of the split 'train' only, not 'test'; name"
    ):
        load_examples(str(tmp_path / "train"), fields="math500", split="test")
    assert len(load_examples(str(tmp_path / "train"), fields="math500", split="train")) == 2
    assert len(load_examples(str(tmp_path / "train"), fields="math500")) == 2
    assert len(load_examples(str(tmp_path / "None"), fields="math500", split="test")) == 2


def test_a_chat_prompt_ending_with_the_answer_is_refused(tmp_path):
    """A `messages` column holding the assistant's reply was formatted whole as the prompt,
    so the model was shown the answer it was then rewarded for; it is now refused, naming
    the row. Earlier assistant turns (few-shot examples) stay."""
    few_shot = [
        {"role": "user", "content": "1+1?"},
        {"role": "assistant", "content": "2"},
        {"role": "user", "content": "2+2?"},
    ]
    rows = [{"messages": few_shot, "answer": "4"}]
    rows.append({"messages": [*few_shot, {"role": "assistant", "content": "4"}], "answer": "4"})
    path = write_jsonl(tmp_path / "chat.jsonl", rows)
    with pytest.raises(ValueError, match=r"chat\.jsonl:2: the prompt's chat messages end with"):
        load_examples(str(path), fields=FieldMap(prompt="messages"))
    assert (
        load_examples(str(path), fields=FieldMap(prompt="messages"), limit=1)[0].prompt == few_shot
    )


@pytest.mark.parametrize("suffix, sep", [(".csv", ","), (".tsv", "\t")])
def test_a_folder_of_csv_files_keeps_text_as_text(tmp_path, suffix, sep):
    """A folder of CSV splits had its column types guessed by ``datasets``: answers
    ``007, 0.50, 12`` loaded as ``7.0, 0.5, 12.0``, the references silently changed."""
    folder = tmp_path / "splits"
    folder.mkdir()
    rows = ["1 + 6 =", "007"], ["1 / 2 =", "0.50"], ["6 + 6 =", "12"], ["Which?", "None"]
    (folder / f"test{suffix}").write_text(
        sep.join(["prompt", "answer"]) + "\n" + "".join(sep.join(r) + "\n" for r in rows)
    )
    (folder / f"train{suffix}").write_text(f"prompt{sep}answer\n2 + 2 ={sep}4\n")
    examples = load_examples(str(folder), split="test")
    assert [e.reference for e in examples] == ["007", "0.50", "12", "None"]
    assert [e.reference for e in load_examples(str(folder), split="train")] == ["4"]
    (folder / f"train{suffix}").write_text(f"question{sep}answer\n2 + 2 ={sep}4\n")
    with pytest.raises(ValueError, match=r"splits: its files have different columns \(test"):
        load_examples(str(folder), split="test")


def test_a_split_a_folder_lacks_names_the_splits_it_has(tmp_path, capsys):
    """``rlvr data show FOLDER`` of a folder holding only test.jsonl gave datasets' ``Unknown
    split "train". Should be one of ['test']``, naming no option."""
    from rlvr.cli.data import main as data_main

    write_jsonl(tmp_path / "test.jsonl", [{"prompt": "1 + 1 =", "answer": "2"}])
    with pytest.raises(ValueError, match=r"no split 'train'; its splits: test$"):
        load_examples(str(tmp_path))
    assert data_main(["show", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(": no split 'train'; its splits: test; name one with --split")


@pytest.mark.parametrize(
    ("suffix", "end"), [(".jsonl", "line"), (".json", "file")], ids=["jsonl", "json"]
)
def test_a_row_cut_off_at_its_end_says_so_not_column_1(tmp_path, suffix, end):
    """A row missing its closing brace read 'Expecting ',' delimiter at column 1': json counts
    the break after the line's newline, on the line below; it is at the end of the line."""
    path = tmp_path / f"cut{suffix}"
    path.write_text('{"question": "x", "solution": "2"\n' if suffix == ".jsonl" else '[{"a": 1}\n')
    with pytest.raises(ValueError) as err:
        load_examples(str(path), fields="default")
    assert str(err.value).endswith(
        f"invalid JSON (Expecting ',' delimiter at the end of the {end})"
    )
    assert str(err.value).startswith(f"{path}:1: " if end == "line" else f"{path}: ")


def test_a_saved_dataset_dict_with_an_empty_split(tmp_path):
    """``save_to_disk`` of a ``DatasetDict`` whose test split is empty: reading it failed with
    ``IndexError: list index out of range`` inside ``datasets`` whichever split was asked for,
    since every split was loaded. The train split reads; the empty one has no rows."""
    import datasets

    saved = tmp_path / "saved"
    empty = datasets.Dataset.from_dict({"problem": [], "answer": []})
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_list(MATH500_ROWS), "test": empty})
    dd.save_to_disk(str(saved))
    assert len(load_examples(str(saved), fields="math500", split="train")) == 2
    with pytest.raises(ValueError, match=r"saved split 'test': no rows$"):
        load_examples(str(saved), fields="math500", split="test")
    with pytest.raises(ValueError, match="no split 'dev'; its splits: train, test"):
        load_examples(str(saved), fields="math500", split="dev")


GSM8K_ROW = {
    "question": "Natalia sold clips to 48 friends in April and half as many in May. How many?",
    "answer": "In May she sold 48/2 = <<48/2=24>>24.\nIn all 48+24 = <<48+24=72>>72.\n#### 72",
}


def test_a_gsm8k_solution_s_final_answer_is_the_reference(tmp_path):
    """A GSM8K answer field is a worked solution ending in `#### 72`; the math verifier got it
    whole, matched no completion against it (`\\boxed{72}` scored 0), and a run trained on
    rewards that were all 0 without a word. The reference is now the text after `####`."""
    rows = [GSM8K_ROW, {"question": "1,000 + 234?", "answer": "1000 + 234\n#### 1,234\n"}]
    rows.append({"question": "Half of 6?", "answer": "3, with #### inside"})  # not a last line
    path = write_jsonl(tmp_path / "gsm.jsonl", rows)
    examples = load_examples(str(path), fields=FieldMap(prompt="question"))
    assert [e.reference for e in examples] == ["72", "1,234", "3, with #### inside"]
    whole = FieldMap(prompt="question", final_marker=None)
    assert load_examples(str(path), fields=whole)[0].reference == GSM8K_ROW["answer"]
    write_jsonl(path, [{"question": "2+2?", "answer": "2+2 = 4\n####  "}])
    with pytest.raises(ValueError, match=r"gsm\.jsonl:1: field 'answer': .* no answer after it"):
        load_examples(str(path), fields=FieldMap(prompt="question"))


def test_a_metamath_solution_s_final_answer_is_the_reference(tmp_path):
    """MetaMathQA's responses end in a line `The answer is: 72`; the verifier got the solution
    whole (a MATH-derived one's `\\boxed{}` comes before that line, a GSM-derived one has no
    boxed answer at all). The reference is now the text after the marker."""
    rows = [
        {"query": "48 and half of 48?", "response": "48/2 = 24\n#### 72\nThe answer is: 72"},
        {"query": "3 of 4?", "response": "It is $\\boxed{\\frac34}$.\nThe answer is: \\frac{3}{4}"},
    ]
    path = write_jsonl(tmp_path / "metamath.jsonl", rows)
    fields = FieldMap(prompt="query", answer="response")
    assert [e.reference for e in load_examples(str(path), fields=fields)] == ["72", "\\frac{3}{4}"]


def test_chat_messages_named_as_prompt_and_answer_answer_with_the_last_reply(tmp_path):
    """Chat rows (`messages` ending with the assistant's reply, the usual SFT shape) could not
    be read at all: the reply was refused as part of the prompt. Naming the field as both the
    prompt and the answer makes the last message the answer and the ones before the prompt."""
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+3?"}]
    rows = [{"messages": [*chat, {"role": "assistant", "content": "5"}]}]
    path = write_jsonl(tmp_path / "chat.jsonl", rows)
    both = FieldMap(prompt="messages", answer="messages")
    (example,) = load_examples(str(path), fields=both)
    assert example.prompt == chat and example.reference == "5"
    with pytest.raises(ValueError, match="or name this field as the answer field too"):
        load_examples(str(path), fields=FieldMap(prompt="messages"))
    write_jsonl(path, [{"messages": chat}])
    with pytest.raises(ValueError, match=r"chat\.jsonl:1: .* ending with the assistant's answer"):
        load_examples(str(path), fields=both)
    write_jsonl(path, [{"messages": [*chat, {"role": "assistant", "content": " "}]}])
    with pytest.raises(ValueError, match=r"chat\.jsonl:1: the last \(assistant\) message, the"):
        load_examples(str(path), fields=both)


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": "  "}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": ""}],
    ],
)
def test_a_chat_prompt_with_no_user_text_is_refused(tmp_path, messages):
    """A blank user message was formatted as a prompt: the model was asked nothing and
    trained or scored on it."""
    path = write_jsonl(tmp_path / "chat.jsonl", [{"messages": messages, "answer": "4"}])
    with pytest.raises(ValueError, match=r"chat\.jsonl:1: .* no user message with text"):
        load_examples(str(path), fields=FieldMap(prompt="messages"))


def test_an_answer_given_as_one_assistant_message_is_its_text(tmp_path):
    """TRL's conversational prompt/completion rows hold the answer as `[{"role": "assistant",
    "content": ...}]`; that list was the reference, and the verifier failed on every
    completion against it."""
    prompt = [{"role": "user", "content": "2+3?"}]
    rows = [{"prompt": prompt, "completion": [{"role": "assistant", "content": "\\boxed{5}"}]}]
    path = write_jsonl(tmp_path / "pc.jsonl", rows)
    (example,) = load_examples(str(path), fields=FieldMap(answer="completion"))
    assert example.prompt == prompt and example.reference == "\\boxed{5}"
    write_jsonl(path, [{"prompt": prompt, "completion": [{"role": "assistant", "content": ""}]}])
    with pytest.raises(
        ValueError, match=r"pc\.jsonl:1: field 'completion' \(the answer\) is empty"
    ):
        load_examples(str(path), fields=FieldMap(answer="completion"))
