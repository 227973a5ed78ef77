"""Loading prompt sets from JSONL, Parquet, or ``datasets`` into :class:`Example` lists.

Sources, by what ``source`` is:

- a name in :data:`rlvr.data.fields.DATASETS` (``"math500"``): that hub dataset, its split,
  field mapping and prompt template;
- a ``.jsonl`` / ``.json`` file (one JSON object per line, or a JSON array), or a
  ``.parquet`` file;
- a local directory: ``datasets.load_from_disk`` output, or data files ``datasets`` can read;
- anything else: a Hugging Face Hub dataset name for ``datasets.load_dataset``.

A malformed row raises ``ValueError`` naming the file and line (``data.jsonl:7: ...``), or
the row number for Parquet and ``datasets`` sources; so does a missing field. An answer that
is a GSM8K or MetaMathQA solution (last line ``#### 72``, ``The answer is: 72``) gives the
reference ``72`` (:func:`final_answer`).
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import itertools
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rlvr.data.fields import DATASETS, FIELD_MAPS, FieldMap, field_map

Messages = list[dict[str, str]]
Row = tuple[str, dict[str, Any]]  # (location for error messages, row)

JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")
"""Suffixes of the files :func:`read_file` reads as JSON (lines, or one array)."""
FILE_SUFFIXES = (*JSON_SUFFIXES, ".parquet")
"""Suffixes of the row files :func:`read_file` reads."""


@dataclass(frozen=True)
class Example:
    """One problem: what the model is asked and what its answer is checked against."""

    prompt: str | Messages
    """The prompt text, or chat messages ``[{"role": ..., "content": ...}, ...]``."""
    reference: Any
    """What the verifier receives: an answer string, code tests, or a reasoning-gym entry."""
    id: str
    """Unique id within its dataset."""
    dataset: str = ""
    """Name of the set it came from (per-dataset evaluation tables group by it)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Extra fields named by the mapping's ``metadata`` (level, subject, ...)."""


def read_jsonl(path: str | Path) -> Iterator[Row]:
    """``("file:line", row)`` for each non-blank line; bad JSON names the file and line."""
    path = Path(path)
    with path.open("rb") as handle:
        if path.suffix == ".json":
            text = decode_text(handle.read(), str(path))
            if text.lstrip().startswith("["):
                yield from _json_array(path, text)
                return
            if _columns_object(text):
                raise ValueError(
                    f"{path}: holds one JSON object of columns ({{column: {{row: value}}}}, as "
                    "pandas' to_json writes by default); write rows: to_json(path, "
                    "orient='records', lines=True)"
                )
            if _one_object_over_lines(text):
                raise ValueError(
                    f"{path}: holds one JSON object over several lines; a .json file holds a "
                    "list of rows ([{...}, ...]) or one row per line"
                )
        handle.seek(0)
        for lineno, raw in enumerate(handle, start=1):
            line = decode_text(raw, f"{path}:{lineno}")
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(_invalid_json(f"{path}:{lineno}", err)) from None
            yield f"{path}:{lineno}", _as_object(row, f"{path}:{lineno}")


def _columns_object(text: str) -> bool:
    """Whether ``text`` is one JSON object of columns keyed by row number,
    ``{"question": {"0": ..., "1": ...}, ...}``, as pandas' ``DataFrame.to_json`` writes."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return False
    if not isinstance(value, dict) or not value:
        return False
    columns = list(value.values())
    return all(isinstance(c, dict) and c.keys() == columns[0].keys() for c in columns) and all(
        key.isdigit() for key in columns[0]
    )


def _one_object_over_lines(text: str) -> bool:
    """Whether ``text`` is a single JSON object written over several lines (pretty-printed)."""
    if "\n" not in text.strip():
        return False
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False


PACKED = {
    b"\x1f\x8b": ("gzip-compressed", "gunzip"),
    b"PK\x03\x04": ("a zip archive", "unzip"),
    b"BZh": ("bzip2-compressed", "bunzip2"),
    b"\xfd7zXZ\x00": ("xz-compressed", "unxz"),
    b"\x28\xb5\x2f\xfd": ("zstd-compressed", "unzstd"),
}
"""Leading bytes of compressed files -> what the file is, and the tool that unpacks it."""
PACKED_SUFFIXES = {
    ".gz": "gunzip",
    ".zip": "unzip",
    ".bz2": "bunzip2",
    ".xz": "unxz",
    ".zst": "unzstd",
}
"""Suffixes of compressed files -> the tool that unpacks them."""


def decode_text(raw: bytes, where: str, expected: str = "a text file") -> str:
    """UTF-8 text (a leading byte-order mark, as some editors write, dropped), or an error at
    ``where`` naming what the bytes are when known: weights (:func:`weights_kind`, not
    ``expected``) or a compressed file (and the tool that unpacks it)."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        said = f"{where}: not UTF-8 text (byte {raw[err.start]:#04x} at byte {err.start + 1})"
        if (kind := weights_kind(raw)) is not None:
            raise ValueError(f"{said}; it is {kind}, not {expected}") from None
        packed = next((how for magic, how in PACKED.items() if raw.startswith(magic)), None)
        hint = f"; it is {packed[0]}: unpack it first ({packed[1]})" if packed else ""
        raise ValueError(said + hint) from None


def weights_kind(raw: bytes) -> str | None:
    r"""What a file of weights starting with ``raw`` is: a PyTorch checkpoint (``torch.save``'s
    zip, whose first entry is ``<name>/data.pkl``: a run's ``trainer_state.pt``) or a
    safetensors file (an 8-byte header length, then its JSON header); ``None`` for others.

    >>> weights_kind(b"PK\x03\x04" + bytes(22) + b"\x16\x00\x00\x00trainer_state/data.pkl")
    'a PyTorch checkpoint (torch.save)'
    >>> weights_kind((9).to_bytes(8, "little") + b'{"a": {}}'), weights_kind(b"PK\x03\x04")
    ('a safetensors weights file', None)
    """
    if raw.startswith(b"PK\x03\x04") and len(raw) >= 30:
        length = int.from_bytes(raw[26:28], "little")
        if raw[30 : 30 + length].endswith(b"data.pkl"):
            return "a PyTorch checkpoint (torch.save)"
    if len(raw) > 9 and raw[8:10] == b'{"' and int.from_bytes(raw[:8], "little") <= len(raw) - 8:
        return "a safetensors weights file"
    return None


def field_values(paths: Iterable[str | Path], name: str, hint: str = "") -> set[str]:
    """Every value of the field ``name`` in the given JSONL files; a row without it names its file
    and line (``hint``: appended to that error, e.g. which kind of file was expected)."""
    found = set()
    for path in paths:
        for where, row in read_jsonl(path):
            if name not in row:
                raise ValueError(f"{where}: missing field {name!r}{hint}")
            found.add(row[name])
    return found


def _json_array(path: Path, text: str) -> Iterator[Row]:
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as err:
        where = str(path) if _past_end(err) else f"{path}:{err.lineno}"  # no line to name
        raise ValueError(_invalid_json(where, err, "file")) from None
    for i, row in enumerate(rows):
        yield f"{path} item {i}", _as_object(row, f"{path} item {i}")


def _invalid_json(where: str, err: json.JSONDecodeError, text: str = "line") -> str:
    """One line naming where the JSON breaks; ``json``'s messages that end in "at" ("Unterminated
    string starting at") get the column, not a second "at". A break past the last character
    (a row cut off) is "at the end of the ``text``": ``json`` counts it on the line after."""
    at = f"the end of the {text}" if _past_end(err) else f"column {err.colno}"
    return f"{where}: invalid JSON ({err.msg.removesuffix(' at')} at {at})"


def _past_end(err: json.JSONDecodeError) -> bool:
    """The text stops before the JSON does (a row cut off): ``json`` puts the break on a line
    after the last."""
    return err.pos >= len(err.doc.rstrip())


def _as_object(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(row).__name__}")
    return row


def read_parquet(path: str | Path) -> Iterator[Row]:
    """``("file row N", row)`` for each row of a Parquet file (N counts from 0)."""
    import pyarrow.parquet as pq

    for i, row in enumerate(pq.read_table(path).to_pylist()):
        yield f"{path} row {i}", row


def read_file(path: str | Path) -> Iterator[Row]:
    """Rows of a ``.jsonl`` / ``.json`` / ``.ndjson`` or ``.parquet`` file; another suffix is
    refused with the ones supported."""
    path = Path(path)
    if path.suffix in JSON_SUFFIXES:
        return read_jsonl(path)
    if path.suffix == ".parquet":
        return read_parquet(path)
    hint = ""
    if path.suffix in PACKED_SUFFIXES:
        hint = f" ({path.suffix} is compressed: unpack it first, {PACKED_SUFFIXES[path.suffix]})"
    if path.suffix in (".csv", ".tsv"):  # how to convert one, its answers kept as text
        sep = ", sep='\\t'" if path.suffix == ".tsv" else ""
        hint = (
            f" (pandas: read_csv(path{sep}, dtype=str).to_json(out, orient='records', lines=True))"
        )
    raise ValueError(
        f"{path}: unsupported file type {path.suffix!r}; use .jsonl, .json, .ndjson or .parquet{hint}"
    )


def read_hf(source: str, *, split: str, configs: tuple[str | None, ...] = (None,)) -> Iterator[Row]:
    """Rows of a ``datasets`` dataset: hub name, local data directory, or ``save_to_disk`` output."""
    for config in configs:
        table = _load_hf(source, split, config)
        label = f"{source}[{config + ', ' if config else ''}{split}]"
        for i, row in enumerate(table):
            yield f"{label} row {i}", dict(row)


def _load_hf(source: str, split: str, config: str | None):
    import datasets

    path = Path(source)
    if path.is_dir() and ((path / "state.json").exists() or (path / "dataset_dict.json").exists()):
        return _load_saved(path, source, split)
    splits = folder_splits(source) if path.is_dir() else []
    if splits and split not in splits:  # datasets' own error names no option
        raise MissingSplit(f"{source}: no split {split!r}; its splits: {', '.join(splits)}")
    text_columns = _csv_as_text(path) if path.is_dir() else {}
    from huggingface_hub import constants

    try:
        return _load_dataset(source, config, split, text_columns)
    except datasets.exceptions.DatasetsError as err:  # files that do not make one table
        if path.is_dir() and (differ := _different_columns(path)):
            raise ValueError(f"{source}: its files have different columns ({differ})") from err
        cause = str(err.__cause__ or err).strip().splitlines() or [type(err).__name__]
        told = cause[0] if len(cause) == 1 else f"{cause[0]} ... {cause[-1]}"
        raise ValueError(f"{_cannot_load(source, config, split)}: {told}") from err
    except (FileNotFoundError, ValueError, ConnectionError) as err:
        found = path.exists() or hub_cached(source)  # the split or config is what is missing
        offline = (
            " (HF_HUB_OFFLINE is set and the Hugging Face cache has no copy: give a local file "
            "or directory)"
        )
        raise ValueError(
            f"{_cannot_load(source, config, split)}: {err}"
            + ("" if found else (offline if constants.HF_HUB_OFFLINE else "") + _not_named(source))
        ) from err


def _cannot_load(source: str, config: str | None, split: str) -> str:
    """How an error loading the hub dataset or folder ``source`` begins."""
    return f"could not load dataset {source!r} (config {config!r}, split {split!r})"


def _load_dataset(source: str, config: str | None, split: str, options: dict[str, Any]):
    """``datasets.load_dataset`` of ``source``; offline, a hub dataset ``datasets`` never built
    is read from its files in the Hugging Face cache (:func:`_offline_snapshot`), and when
    they lack the config's, ``datasets``' own error says what its cache holds."""
    import datasets

    if snapshot := _offline_snapshot(source, config):
        try:
            return datasets.load_dataset(snapshot, config, split=split)
        except FileNotFoundError:  # a partial download: not this config's files
            pass
    with quiet_offline_cache():
        return datasets.load_dataset(source, config, split=split, **options)


_CACHE_NOTES = (
    "Using the latest cached version of the dataset since",
    "Found the latest cached dataset configuration",
)
"""How ``datasets`` begins the two warnings it logs each time it reads a hub dataset from its
cache instead of the Hub: with ``HF_HUB_OFFLINE`` set by the user, that is what was asked."""
_CACHE_LOGGERS = ("datasets.load", "datasets.packaged_modules.cache.cache")
"""The ``datasets`` loggers that log them."""
_QUIET = contextvars.ContextVar("rlvr_quiet_offline_cache", default=False)


class _CacheNotes(logging.Filter):
    """Drops :data:`_CACHE_NOTES` inside :func:`quiet_offline_cache`; every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_QUIET.get() and record.getMessage().startswith(_CACHE_NOTES))


@contextlib.contextmanager
def quiet_offline_cache() -> Iterator[None]:
    """Within the block, with ``HF_HUB_OFFLINE`` set, ``datasets`` does not log that it reads
    a hub dataset from its cache (:data:`_CACHE_NOTES`, two lines per load); its other warnings
    and its errors are as they were, and so is every load outside the block."""
    import datasets
    from huggingface_hub import constants

    if not (constants.HF_HUB_OFFLINE or datasets.config.HF_HUB_OFFLINE):
        yield  # online, reading the cache means the Hub could not be reached: worth a line
        return
    for name in _CACHE_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _CacheNotes) for f in logger.filters):
            logger.addFilter(_CacheNotes())
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def _load_saved(path: Path, source: str, split: str) -> Iterable[Any]:
    """The rows of ``save_to_disk`` output: a ``DatasetDict``'s ``split`` alone (``datasets``
    reads every split, and fails with an ``IndexError`` on one saved empty), or a ``Dataset``;
    an empty one (no data files) has no rows."""
    import datasets

    if (path / "dataset_dict.json").exists():
        splits = folder_splits(str(path))
        if split not in splits:
            raise MissingSplit(f"{source}: no split {split!r}; its splits: {', '.join(splits)}")
        path = path / split
    if not json.loads((path / "state.json").read_text()).get("_data_files"):
        return []
    return datasets.Dataset.load_from_disk(str(path))


_ROW_KINDS = {".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}
_ROW_KINDS |= {".parquet": "parquet", ".arrow": "arrow"}
"""Row files ``datasets`` reads from a folder, by the reader it uses for them."""


def _row_files(folder: Path) -> list[Path]:
    """The row files of a data folder; one mixing kinds (``a.jsonl`` and ``b.csv``) is refused:
    ``datasets`` would read only the commonest kind and drop the others without a word."""
    files, suffixes = [], {}
    for file in sorted(folder.rglob("*")):
        hidden = any(part.startswith(".") for part in file.relative_to(folder).parts)
        if file.suffix in _ROW_KINDS and file.is_file() and not hidden:
            suffixes.setdefault(_ROW_KINDS[file.suffix], file.suffix)
            files.append(file)
    if len(suffixes) > 1:
        raise ValueError(
            f"{folder}: holds {' and '.join(sorted(suffixes.values()))} files; only one kind "
            "would be read (the others dropped): keep one kind of file in the folder"
        )
    return files


def _different_columns(folder: Path, rows: int = 100) -> str | None:
    """``a.jsonl: id, prompt, answer; b.jsonl: prompt, response`` when the JSON or Parquet row
    files of ``folder`` hold rows of different columns (the first ``rows`` of each), which
    ``datasets`` cannot make one table of ("column names don't match"); else ``None``."""
    columns = {}
    for file in _row_files(folder):
        if file.suffix not in FILE_SUFFIXES:
            return None
        keys: dict[str, None] = {}
        try:
            for _, row in itertools.islice(read_file(file), rows):
                keys.update(dict.fromkeys(row))
        except ValueError:  # a file that does not read: datasets' own error says more
            return None
        columns[file] = list(keys)
    if len({frozenset(keys) for keys in columns.values()}) < 2:
        return None
    return "; ".join(f"{f.relative_to(folder)}: {', '.join(k)}" for f, k in columns.items())


def _csv_as_text(folder: Path) -> dict[str, Any]:
    """For a folder of CSV/TSV files: ``load_dataset`` options reading every column as text
    (its header names them), so an answer ``007`` or ``0.50`` is not guessed to be a number
    (``7.0``, ``0.5``), nor ``NA`` or ``None`` a missing value; ``{}`` for other folders."""
    import csv

    import datasets

    files = _row_files(folder)
    if not files or _ROW_KINDS[files[0].suffix] != "csv":
        return {}
    headers = {}
    for file in files:
        with file.open(newline="", encoding="utf-8-sig", errors="replace") as handle:
            delimiter = "\t" if file.suffix == ".tsv" else ","
            headers[file] = next(csv.reader(handle, delimiter=delimiter), [])
    if len({tuple(h) for h in headers.values()}) > 1:  # datasets cannot make one table of them
        told = "; ".join(f"{f.relative_to(folder)}: {', '.join(h)}" for f, h in headers.items())
        raise ValueError(f"{folder}: its files have different columns ({told})")
    features = datasets.Features({name: datasets.Value("string") for name in headers[files[0]]})
    return {"features": features, "keep_default_na": False}


def _not_named(source: str) -> str:
    """For a name that is neither a named set's hub name nor a local path: the named sets, and
    the one it may misspell (``MATH500``, ``math-500``)."""
    if source in {spec.hub for spec in DATASETS.values()} or Path(source).exists():
        return ""
    key = source.lower().replace("-", "").replace("_", "")
    close = [name for name in DATASETS if name.replace("-", "") == key]
    close = close or difflib.get_close_matches(source.lower(), DATASETS, n=1)
    guess = f"did you mean {close[0]}? " if close else ""
    return f"; {guess}named sets: {', '.join(sorted(DATASETS))}"


def generated_fields(row: Any) -> str | None:
    """The field mapping of a row as ``rlvr data gen`` writes it, which has no ``prompt`` field
    (the default mapping's): ``reasoning_gym`` for a reasoning-gym entry with its id (``id``,
    ``question``, ``answer``, ``metadata.source_dataset``: :mod:`rlvr.data.gym`),
    ``code_tasks`` for a code task (``id``, ``question``, ``tests`` with ``fn_name``,
    ``inputs`` and ``outputs``, ``family``, ``level``, ``key``: :mod:`rlvr.data.code_tasks`);
    ``None`` for any other row (a plain ``question`` / ``answer`` one too).

    >>> generated_fields({"id": "chain_sum-0-3", "question": "1 + 2 =", "answer": "3",
    ...                   "metadata": {"source_dataset": "chain_sum", "source_index": 3}})
    'reasoning_gym'
    >>> generated_fields({"id": "q1", "question": "1 + 2 =", "answer": "3"}) is None
    True
    """
    if not isinstance(row, dict) or "prompt" in row or not isinstance(row.get("question"), str):
        return None
    if not isinstance(row.get("id"), str):
        return None
    metadata, tests = row.get("metadata"), row.get("tests")
    if "answer" in row and isinstance(metadata, dict):
        return "reasoning_gym" if isinstance(metadata.get("source_dataset"), str) else None
    code = isinstance(tests, dict) and {"fn_name", "inputs", "outputs"} <= tests.keys()
    return "code_tasks" if code and {"family", "level", "key"} <= row.keys() else None


def file_fields(source: str) -> str | None:
    """The mapping :func:`generated_fields` finds in the first row of the local row file
    ``source``; ``None`` for another source, or a first row that cannot be read (loading the
    file says why)."""
    path = Path(source).expanduser()
    if path.suffix not in FILE_SUFFIXES or not path.is_file():
        return None
    try:
        first = next(iter(read_file(path)), None)
    except (OSError, ValueError):
        return None
    return generated_fields(first[1]) if first else None


def detected_map(mapping: FieldMap, row: Any) -> FieldMap:
    """``mapping``; the default one, on a first ``row`` as ``rlvr data gen`` writes it (whose
    ``prompt`` it would miss), is that row's mapping (:func:`generated_fields`)."""
    name = generated_fields(row) if mapping == FIELD_MAPS["default"] else None
    return FIELD_MAPS[name] if name else mapping


def _generated_hint(row: Any) -> str:
    """A pointer to the ``reasoning_gym`` mapping for a row ``rlvr data gen`` wrote."""
    metadata = row.get("metadata") if isinstance(row, dict) else None
    if isinstance(metadata, dict) and "source_dataset" in metadata and "question" in row:
        return (
            " (a reasoning-gym row, as rlvr data gen writes: use the field mapping reasoning_gym)"
        )
    return ""


class MissingSplit(ValueError):
    """A local folder lacks the split asked for (callers add the option that names the split)."""


class NoRows(ValueError):
    """A source holds no rows (callers add the option that names the source)."""


class MissingField(ValueError):
    """A row lacks a field its mapping names (callers add the option that renames the fields)."""


def get_path(row: dict[str, Any], dotted: str, where: str, role: str) -> Any:
    """``row["a"]["b"]`` for ``"a.b"``; a missing field names the field and the row."""
    value: Any = row
    for part in dotted.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        else:
            present = ", ".join(sorted(row)) if isinstance(row, dict) else "-"
            raise MissingField(
                f"{where}: missing field {dotted!r} (the {role}); the row has: {present}"
                + _generated_hint(row)
            )
    return value


def _check_prompt(prompt: Any, where: str) -> str | Messages:
    if isinstance(prompt, str) and prompt.strip():
        return prompt
    is_messages = (
        isinstance(prompt, list)
        and prompt
        and all(
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str)
            for m in prompt
        )
    )
    if is_messages and prompt[-1]["role"] == "assistant":  # the answer, shown to the model
        raise ValueError(
            f"{where}: the prompt's chat messages end with an assistant message, which the "
            "model would be given as part of its prompt; keep the messages before it, or name "
            "this field as the answer field too, to make that message the answer"
        )
    if is_messages and not any(m["role"] == "user" and m["content"].strip() for m in prompt):
        raise ValueError(  # the model would be asked nothing
            f"{where}: the prompt's chat messages have no user message with text, got {prompt!r:.80}"
        )
    if is_messages:
        return [{"role": m["role"], "content": m["content"]} for m in prompt]
    raise ValueError(
        f"{where}: prompt must be a non-empty string or a list of {{role, content}} messages, got {prompt!r:.80}"
    )


def apply_template(prompt: str | Messages, template: str | None) -> str | Messages:
    """Put ``prompt`` (or the last user message) into ``template`` at ``{prompt}``.

    >>> apply_template("1+1?", "Q: {prompt}\\nA:")
    'Q: 1+1?\\nA:'
    """
    if template is None:
        return prompt
    if "{prompt}" not in template:
        raise ValueError(f"template must contain '{{prompt}}', got {template!r}")
    if isinstance(prompt, str):
        return template.replace("{prompt}", prompt)
    users = [i for i, m in enumerate(prompt) if m["role"] == "user"]
    if not users:
        return prompt
    out = [dict(m) for m in prompt]
    out[users[-1]]["content"] = template.replace("{prompt}", out[users[-1]]["content"])
    return out


def row_to_example(
    row: dict[str, Any], where: str, fields: FieldMap, *, dataset: str, index: int
) -> Example:
    """Map one row to an :class:`Example` (errors name ``where``: file and line). A mapping
    whose answer field is its prompt field (chat ``messages``) answers with the last message,
    the assistant's, and prompts with the messages before it."""
    value = get_path(row, fields.prompt, where, "prompt field")
    if fields.reference == "answer" and fields.answer == fields.prompt:
        value, reference = _last_reply(value, where)
        prompt = _check_prompt(value, where)
        reference = final_answer(reference, fields.final_marker, f"{where}: the last message")
    else:
        prompt = _check_prompt(value, where)
        reference = row if fields.reference == "row" else _reference(row, fields, where)
    ident = str(get_path(row, fields.id, where, "id field")) if fields.id else f"{dataset}-{index}"
    metadata = {k: get_path(row, k, where, "metadata") for k in fields.metadata if _has(row, k)}
    return Example(prompt=prompt, reference=reference, id=ident, dataset=dataset, metadata=metadata)


def _reference(row: dict[str, Any], fields: FieldMap, where: str) -> Any:
    """The answer or tests ``fields`` names in ``row``; an empty one is an error, since every
    completion would score wrong against it."""
    path = fields.answer if fields.reference == "answer" else fields.tests
    reference = get_path(row, path, where, f"{fields.reference} field")
    if fields.reference == "answer":
        reference = _reply_text(reference)
    if reference is None or (isinstance(reference, str) and not reference.strip()):
        raise ValueError(f"{where}: field {path!r} (the {fields.reference}) is empty")
    if fields.reference == "answer":
        reference = final_answer(reference, fields.final_marker, f"{where}: field {path!r}")
    return reference


def _reply_text(value: Any) -> Any:
    """The text of an answer given as one assistant message, ``[{"role": "assistant",
    "content": ...}]`` (TRL's conversational prompt/completion rows); another value as it is."""
    if not (isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict)):
        return value
    message = value[0]
    content = message.get("content")
    return content if message.get("role") == "assistant" and isinstance(content, str) else value


def _last_reply(messages: Any, where: str) -> tuple[Any, str]:
    """``(the messages before the last, the last one's text)`` of chat messages ending with an
    assistant message, which a field named as both prompt and answer must hold."""
    last = messages[-1] if isinstance(messages, list) and messages else None
    if not isinstance(last, dict) or last.get("role") != "assistant":
        raise ValueError(
            f"{where}: the prompt field is also the answer field, so it must hold chat messages "
            f"ending with the assistant's answer, got {messages!r:.80}"
        )
    reply = last.get("content")
    if not isinstance(reply, str) or not reply.strip():
        raise ValueError(f"{where}: the last (assistant) message, the answer, is empty")
    return messages[:-1], reply


def final_answer(
    answer: Any, marker: str | tuple[str, ...] | None, where: str = "the answer"
) -> Any:
    """The final answer of a worked solution whose last line starts with ``marker`` (or one of
    them: GSM8K's ``...\\n#### 72``, MetaMathQA's ``...\\nThe answer is: 72``: ``72``), else
    ``answer`` as it is; nothing after the marker is an error.

    >>> final_answer("48/2 = 24 in May.\\n48+24 = 72 in all.\\n#### 72", "####")
    '72'
    >>> final_answer("so 3/4 of it.\\nThe answer is: \\\\frac{3}{4}", ("####", "The answer is:"))
    '\\\\frac{3}{4}'
    >>> final_answer(r"so $\\boxed{3}$", "####")
    'so $\\\\boxed{3}$'
    """
    if marker is None or not isinstance(answer, str) or not answer.strip():
        return answer
    last = answer.strip().splitlines()[-1].strip()
    markers = (marker,) if isinstance(marker, str) else marker
    found = next((m for m in markers if last.startswith(m)), None)
    if found is None:
        return answer
    final = last.removeprefix(found).strip()
    if not final:
        raise ValueError(f"{where}: the solution's last line {last!r} has no answer after it")
    return final


def _has(row: dict[str, Any], dotted: str) -> bool:
    try:
        get_path(row, dotted, "", "")
    except ValueError:
        return False
    return True


_OTHER_FILE_SUFFIXES = (".csv", ".tsv", ".txt", ".arrow", ".gz")
"""File types no hub name ends with, though rlvr does not read them: a missing one is a
missing file, not a dataset the hub could not be reached for."""


def looks_like_path(source: str) -> bool:
    """Whether ``source`` names a local file or directory rather than a hub dataset."""
    suffix = Path(source).suffix
    return source.startswith(("/", "./", "../", "~")) or suffix in (
        *FILE_SUFFIXES,
        *_OTHER_FILE_SUFFIXES,
    )


def is_local(source: str) -> bool:
    """Whether ``source`` is read from this machine: it looks like a path, or one exists."""
    return looks_like_path(source) or Path(source).expanduser().exists()


def hub_cached(source: str) -> bool:
    """Whether the Hugging Face cache holds the hub dataset ``source`` (a named set: each of its
    configs) for a load with ``HF_HUB_OFFLINE`` set: the tables ``datasets`` built when it
    loaded the set online, or the repository's files (:func:`_offline_snapshot`)."""
    spec = DATASETS.get(source)
    repo, configs = (spec.hub, spec.configs) if spec else (source, (None,))
    return all(_tables_cached(repo, c) or _snapshot(repo) is not None for c in configs)


def _tables_cached(repo: str, config: str | None) -> bool:
    """Whether ``datasets``' cache holds tables of the hub dataset ``repo`` (of ``config``;
    ``None``: of any), which is what ``datasets.load_dataset`` reads with ``HF_HUB_OFFLINE``
    set (it keeps them once a load online has built them)."""
    import datasets
    from datasets.naming import camelcase_to_snakecase

    org, _, name = repo.rpartition("/")
    folder = Path(datasets.config.HF_DATASETS_CACHE).expanduser()
    folder /= f"{org}___{camelcase_to_snakecase(name)}" if org else camelcase_to_snakecase(name)
    return any(path.is_dir() for path in folder.glob(f"{config or '*'}/*/*"))


def _snapshot(repo: str) -> str | None:
    """The folder of the hub dataset ``repo``'s files in ``huggingface_hub``'s cache (its
    ``main``), or ``None`` when not there."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return snapshot_download(repo, repo_type="dataset", local_files_only=True)
    except (HFValidationError, LocalEntryNotFoundError):
        return None


def _offline_snapshot(source: str, config: str | None) -> str | None:
    """With ``HF_HUB_OFFLINE`` set, for a hub dataset whose ``config`` ``datasets`` never built
    (downloaded with ``huggingface-cli download`` or ``snapshot_download``): its files' folder
    in the Hugging Face cache, read as a local folder (``datasets`` reads only its own tables
    offline); ``None`` otherwise."""
    from huggingface_hub import constants

    if not constants.HF_HUB_OFFLINE or is_local(source) or _tables_cached(source, config):
        return None
    return _snapshot(source)


def check_source(source: str) -> None:
    """A cheap check before anything loads: a local path that does not exist is an error.

    Named datasets, hub names and ``reasoning_gym:<task>`` pass (they are checked when read).
    """
    refuse_run_dir(source)
    if source in DATASETS or not looks_like_path(source):
        return
    if not Path(source).expanduser().exists():
        raise ValueError(f"{source}: no such file or directory")


def is_run_dir(source: str) -> bool:
    """Whether ``source`` is the directory of an ``rlvr train`` / ``rlvr sft`` run: its
    ``config.yaml`` beside its ``metrics.jsonl`` or ``checkpoints/``."""
    path = Path(source).expanduser()
    logged = (path / "metrics.jsonl").is_file() or (path / "checkpoints").is_dir()
    return (path / "config.yaml").is_file() and logged


def refuse_run_dir(source: str) -> None:
    """Refuse a run's directory as data, before anything loads: ``datasets`` would read its
    metrics, samples and reports as rows (printing its "Generating ... split" lines) and fail
    on their columns."""
    if is_run_dir(source):
        raise ValueError(
            f"{source}: an rlvr run's directory, not data; give "
            "the file of its problems (its config.yaml names them under data:)"
        )


def folder_splits(source: str) -> list[str]:
    """The splits ``datasets`` reads from the local folder ``source`` (``train.jsonl`` and
    ``test.jsonl``: ``train``, ``test``; a ``save_to_disk`` folder's own); ``[]`` for anything else."""
    path = Path(source).expanduser()
    if not path.is_dir() or (path / "state.json").is_file():
        return []
    if (path / "dataset_dict.json").is_file():
        return list(json.loads((path / "dataset_dict.json").read_text()).get("splits", []))
    from datasets.data_files import get_data_patterns

    try:
        return [str(split) for split in get_data_patterns(str(path))]
    except FileNotFoundError:  # no data files: loading says so
        return []


def source_splits(source: str, config: str | None = None) -> list[str]:
    """The splits of ``source``: a local folder's (:func:`folder_splits`), or a hub dataset's
    as ``datasets`` resolves them (offline: from the Hugging Face cache); ``[]`` for a file, a
    named set (it has its own split) or a hub dataset whose splits cannot be told here (no
    copy, no network: its load says so)."""
    import datasets

    if source in DATASETS:
        return []
    if is_local(source):
        return folder_splits(source)
    if snapshot := _offline_snapshot(source, config):
        return folder_splits(snapshot)
    try:
        with quiet_offline_cache():
            return [str(split) for split in datasets.get_dataset_split_names(source, config)]
    except (OSError, ValueError, datasets.exceptions.DatasetsError):
        return []


def check_hub_split(source: str, split: str | None, config: str | None = None) -> None:
    """Refuse, with the line loading it gives (``Unknown split "validation". Should be one of
    ['train', 'test'].``), a ``split`` the hub dataset or named set ``source`` lacks, when its
    splits are known without fetching anything: with ``HF_HUB_OFFLINE`` set, from the Hugging
    Face cache (:func:`source_splits`). ``split`` ``None``: the one a load reads, a named set's
    own, else ``train``. Nothing is checked of a local source, online, or of a set whose splits
    the cache cannot tell (no copy: the load says so)."""
    from huggingface_hub import constants

    if not constants.HF_HUB_OFFLINE or is_local(source):
        return
    spec = DATASETS.get(source)
    repo, configs = (spec.hub, spec.configs) if spec else (source, (None,))
    split = split or (spec.split if spec else "train")
    for each in (config,) if config else configs:
        splits = source_splits(repo, each)
        if splits and split not in splits:  # as datasets' ArrowReader says it
            raise ValueError(
                f'{_cannot_load(repo, each, split)}: Unknown split "{split}". Should be one of '
                f"{splits}."
            )


def _rows(source: str, split: str | None, config: str | None) -> tuple[Iterator[Row], str]:
    """Rows of ``source`` and the dataset name they get by default (``~`` is the home folder)."""
    source = os.path.expanduser(source)
    path = Path(source)
    if path.is_file():
        if split is not None:  # else every row would be read as that split without a word
            raise ValueError(f"{source}: one file has no splits; split {split!r} is for folders")
        return read_file(path), path.stem
    if looks_like_path(source) and not path.exists():
        raise ValueError(f"{source}: no such file")
    refuse_run_dir(source)
    saved = _saved_split(path)
    if split is not None and saved not in (None, split):  # it was read whole as that split
        raise ValueError(
            f"{source}: a saved dataset of the split {saved!r} only, not {split!r}; name "
            f"{saved!r} or no split"
        )
    return read_hf(source, split=split or "train", configs=(config,)), path.name or source


def _saved_split(path: Path) -> str | None:
    """The split a ``Dataset.save_to_disk`` folder records (``None``: none, or not one)."""
    state = path / "state.json"
    return json.loads(state.read_text()).get("_split") if state.is_file() else None


def load_examples(
    source: str,
    *,
    fields: FieldMap | str | None = None,
    split: str | None = None,
    config: str | None = None,
    template: str | None = None,
    limit: int | None = None,
    name: str | None = None,
    unique: bool | None = None,
    check: Callable[[Example], None] | None = None,
) -> list[Example]:
    """Load ``source`` (named dataset, file, directory or hub name) as :class:`Example` s.

    ``fields`` is a :class:`FieldMap` or a name in ``FIELD_MAPS`` (named datasets bring
    their own; the default mapping on rows as ``rlvr data gen`` writes them: theirs,
    :func:`generated_fields`); ``template`` wraps each prompt (``"{prompt}"`` marks where); ``limit``
    keeps the first examples; ``name`` labels them (default: dataset or file name);
    ``unique`` drops rows whose prompt repeats an earlier one (default: the named
    dataset's setting, else off); ``check(example)`` raises ``ValueError`` for an example
    the caller cannot use, and the error then names the example's file and line.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    if source in DATASETS:
        spec = DATASETS[source]
        configs = (config,) if config else spec.configs
        rows = read_hf(spec.hub, split=split or spec.split, configs=configs)
        fields, template, default_name = fields or spec.fields, template or spec.template, source
        unique = spec.unique if unique is None else unique
    else:
        rows, default_name = _rows(source, split, config)
    mapping, dataset = field_map(fields), name or default_name
    examples: list[Example] = []
    seen: set[str] = set()
    for index, (where, row) in enumerate(rows):
        mapping = detected_map(mapping, row) if index == 0 else mapping
        example = row_to_example(row, where, mapping, dataset=dataset, index=index)
        if check is not None:
            try:
                check(example)
            except ValueError as err:
                raise ValueError(f"{where}: {err}") from None
        if unique:
            key = json.dumps(example.prompt, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
        examples.append(replace(example, prompt=apply_template(example.prompt, template)))
        if len(examples) == limit:
            break
    if not examples:
        raise NoRows(f"{source}{f' split {split!r}' if split else ''}: no rows")
    return examples
