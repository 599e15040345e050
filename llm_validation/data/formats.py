"""Instruction data as people have it: JSON, JSONL or ``datasets`` folders, in three layouts.

The ``upsample`` tool (:mod:`llm_validation.experiments.upsample`) reads a user's fine-tuning
data here and writes the upsampled mixture back *in the same layout*, so any trainer that read the
original reads the mixture.

Files: a JSON array, a JSONL file (one object per line; the two are told apart by the first
character, as :mod:`.records` does), or a folder written by ``datasets``' ``save_to_disk`` (a
``Dataset``, or a ``DatasetDict`` whose ``split`` is taken).

Layouts (:data:`FORMATS`; ``"auto"`` picks the first whose fields the first record has):

=================  ============================  ================================================
format             fields (renamable)            what the proxy sees
=================  ============================  ================================================
``instruction``    ``instruction``, ``output``   the Alpaca prompt around the instruction (with
                   (optional ``input``)          its "### Input:" block when ``input`` is set),
                                                 the output as the response (Alpaca,
                                                 MathInstruct)
``prompt``         ``prompt``, ``completion``    the prompt verbatim, the completion as the
                                                 response (TRL's prompt-completion layout)
``messages``       ``messages``: a list of       the conversation rendered by the proxy
                   ``{"role", "content"}``,      tokenizer's chat template: the last turn is the
                   the last one ``assistant``    response, everything before it the prompt
=================  ============================  ================================================

An optional source field (default ``source``) groups the examples for the per-source
clustering of the paper (MathInstruct's 13 sub-datasets); without it every example is one group.

Every problem is a :class:`~.records.DataFormatError` naming the file, the line (the row for a
``datasets`` folder) and the field, before any model is loaded.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path

from .records import DataFormatError, Example, _read_records

__all__ = [
    "FORMATS",
    "ALPACA_WITH_INPUT",
    "DataFields",
    "UserData",
    "read_user_data",
    "render_examples",
    "write_mixture",
]

#: The layouts :func:`read_user_data` understands (see the module docstring).
FORMATS = ("instruction", "prompt", "messages")

#: Alpaca's prompt for records with a non-empty ``input`` (the "no input" one is
#: :data:`.records.PROMPT_NO_INPUT`).
ALPACA_WITH_INPUT = (
    "Below is an instruction that describes a task, paired with an input that provides further "
    "context. Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:"
)


@dataclasses.dataclass(frozen=True)
class DataFields:
    """The field names of each layout (``--instruction-field`` ... on the command line).

    Attributes:
        instruction, input, output: the ``instruction`` layout (``input`` is optional).
        prompt, completion: the ``prompt`` layout.
        messages: the ``messages`` layout.
        source: the optional group field for the per-source clustering (``None``: no groups).
    """

    instruction: str = "instruction"
    input: str = "input"
    output: str = "output"
    prompt: str = "prompt"
    completion: str = "completion"
    messages: str = "messages"
    source: str | None = "source"

    def required(self, fmt: str) -> tuple[str, ...]:
        """The fields every record of layout ``fmt`` must have."""
        return {
            "instruction": (self.instruction, self.output),
            "prompt": (self.prompt, self.completion),
            "messages": (self.messages,),
        }[fmt]


@dataclasses.dataclass(frozen=True)
class UserData:
    """A user's training data, checked.

    Attributes:
        path: the file or folder read.
        container: ``"json"``, ``"jsonl"`` or ``"datasets"`` (how it was stored).
        format: one of :data:`FORMATS`.
        fields: the field names used.
        records: the records as read (plain dicts), written back unchanged in the mixture.
        lines: the line (JSON/JSONL) or row (``datasets``, from 1) of each record, for messages.
        sources: the group of each record (``"all"`` for every record without a source field).
        has_sources: whether the data has a source field.
    """

    path: Path
    container: str
    format: str
    fields: DataFields
    records: list[dict]
    lines: list[int]
    sources: list[str]
    has_sources: bool

    def __len__(self) -> int:
        return len(self.records)


def _read_container(path: Path, split: str) -> tuple[str, list[tuple[int, object]]]:
    """``(container, [(line, record)])`` of a JSON/JSONL file or a ``save_to_disk`` folder."""
    if path.is_dir():
        if not ((path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()):
            raise DataFormatError(
                f"`--data` folder {str(path)!r} is not a `datasets` folder (no dataset_info.json "
                "or dataset_dict.json, as `Dataset.save_to_disk` writes); give that folder, or a "
                ".json/.jsonl file."
            )
        import datasets

        try:
            ds = datasets.load_from_disk(str(path))
        except Exception as exc:  # noqa: BLE001 - arrow/fsspec errors of a damaged folder
            raise DataFormatError(
                f"`--data` folder {str(path)!r} cannot be read by datasets.load_from_disk "
                f"({type(exc).__name__}: {str(exc)[:120]})."
            ) from None
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                raise DataFormatError(
                    f"`--data` {str(path)!r} holds the splits {sorted(ds)}, not {split!r}; pick "
                    "one with `--split`."
                )
            ds = ds[split]
        return "datasets", [(i + 1, rec) for i, rec in enumerate(ds.to_list())]
    records = _read_records(path, what="`--data`")
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip()
    return ("json" if head[:1] == b"[" else "jsonl"), records


def _sniff(path: Path, line: int, rec: object, fields: DataFields) -> str:
    if not isinstance(rec, dict):
        raise DataFormatError(
            f"{path}:{line}: expected a JSON object (a record); got {type(rec).__name__}."
        )
    for fmt in FORMATS:
        if all(f in rec for f in fields.required(fmt)):
            return fmt
    wanted = "; ".join(f"{fmt}: {', '.join(fields.required(fmt))}" for fmt in FORMATS)
    raise DataFormatError(
        f"{path}:{line}: the record has none of the known layouts' fields ({wanted}); it has "
        f"{sorted(rec)}. Name its fields with --instruction-field/--output-field, "
        "--prompt-field/--completion-field or --messages-field."
    )


def _text(path: Path, line: int, rec: dict, name: str, *, flag: str) -> str:
    if name not in rec:
        raise DataFormatError(
            f"{path}:{line}: missing field {name!r} (fields present: {sorted(rec)}); name the "
            f"field with {flag}."
        )
    value = rec[name]
    if not isinstance(value, str):
        raise DataFormatError(
            f"{path}:{line}: field {name!r} must be a string; got {type(value).__name__} "
            f"{str(value)[:40]!r}."
        )
    if not value.strip():
        raise DataFormatError(f"{path}:{line}: field {name!r} is empty.")
    return value


def _messages(path: Path, line: int, rec: dict, name: str) -> list[dict]:
    if name not in rec:
        raise DataFormatError(
            f"{path}:{line}: missing field {name!r} (fields present: {sorted(rec)}); name the "
            "field with --messages-field."
        )
    msgs = rec[name]
    if not isinstance(msgs, list) or not msgs:
        raise DataFormatError(
            f"{path}:{line}: field {name!r} must be a non-empty list of {{'role', 'content'}} "
            f"messages; got {type(msgs).__name__} {str(msgs)[:40]!r}."
        )
    for j, m in enumerate(msgs):
        if (not isinstance(m, dict) or not isinstance(m.get("role"), str)
                or not isinstance(m.get("content"), str)):  # fmt: skip
            raise DataFormatError(
                f"{path}:{line}: message {j} of {name!r} must be an object with string 'role' "
                f"and 'content'; got {str(m)[:60]!r}."
            )
    if msgs[-1]["role"] != "assistant":
        raise DataFormatError(
            f"{path}:{line}: the last message of {name!r} must be the assistant's (the response "
            f"whose loss is recorded); got role {msgs[-1]['role']!r}."
        )
    if len(msgs) < 2:
        raise DataFormatError(
            f"{path}:{line}: {name!r} holds only the assistant's message; a prompt turn must "
            "come before it."
        )
    if not msgs[-1]["content"].strip():
        raise DataFormatError(f"{path}:{line}: the assistant's last message is empty.")
    return msgs


def read_user_data(
    path: str | os.PathLike,
    *,
    fields: DataFields = DataFields(),
    fmt: str = "auto",
    split: str = "train",
    source_required: bool = False,
    max_examples: int | None = None,
) -> UserData:
    r"""Read and check a user's training data (every record, before any model is loaded).

    Args:
        path: a ``.json``/``.jsonl`` file or a ``datasets.save_to_disk`` folder.
        fields: the field names.
        fmt: one of :data:`FORMATS`, or ``"auto"`` (from the first record's fields).
        split: the split of a ``DatasetDict`` folder.
        source_required: the source field was named explicitly: every record must have it
            (otherwise it is used when the first record has it, and then every record must).
        max_examples: keep only the first ``max_examples`` records.

    Returns:
        A :class:`UserData`.

    Raises:
        DataFormatError: a missing path, an empty or unparsable file, a record without a field
            its layout needs (file, line, field and the flag that renames it).

    Examples:
        >>> import json, tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.jsonl"
        >>> _ = p.write_text(json.dumps({"prompt": "2+2=", "completion": "4"}) + "\n")
        >>> d = read_user_data(p)
        >>> d.format, d.container, len(d), d.sources
        ('prompt', 'jsonl', 1, ['all'])
    """
    p = Path(path).expanduser()
    if fmt != "auto" and fmt not in FORMATS:
        raise ValueError(f"`--format` must be 'auto' or one of {FORMATS}; got {fmt!r}.")
    if not p.exists():
        raise DataFormatError(f"`--data` {str(p)!r} does not exist; give a .json/.jsonl file or "
                              "a datasets folder.")  # fmt: skip
    container, items = _read_container(p, split)
    if max_examples is not None:
        items = items[:max_examples]
    if not items:
        raise DataFormatError(f"`--data` {str(p)!r} holds no records (an empty file or dataset).")
    line0, rec0 = items[0]
    layout = _sniff(p, line0, rec0, fields) if fmt == "auto" else fmt
    src = fields.source
    has_sources = src is not None and (source_required or (isinstance(rec0, dict) and src in rec0))
    records, lines, sources = [], [], []
    flags = {"instruction": ("--instruction-field", "--output-field"),
             "prompt": ("--prompt-field", "--completion-field")}  # fmt: skip
    for line, rec in items:
        if not isinstance(rec, dict):
            raise DataFormatError(
                f"{p}:{line}: expected a JSON object (a record); got {type(rec).__name__}."
            )
        if layout == "messages":
            _messages(p, line, rec, fields.messages)
        else:
            for name, flag in zip(fields.required(layout), flags[layout], strict=True):
                _text(p, line, rec, name, flag=flag)
            if layout == "instruction" and rec.get(fields.input) not in (None, ""):
                if not isinstance(rec[fields.input], str):
                    raise DataFormatError(f"{p}:{line}: field {fields.input!r} must be a string.")
        if has_sources:
            if src not in rec:
                raise DataFormatError(
                    f"{p}:{line}: missing field {src!r} (the source/group field; the first "
                    f"record has it, or --source-field named it; fields present: {sorted(rec)})."
                )
            value = rec[src]
            if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
                raise DataFormatError(
                    f"{p}:{line}: field {src!r} must be a non-empty string or integer (a group "
                    f"name); got {type(value).__name__} {str(value)[:40]!r}."
                )
            sources.append(str(value))
        else:
            sources.append("all")
        records.append(rec)
        lines.append(line)
    return UserData(p, container, layout, fields, records, lines, sources, has_sources)


def _strip_prefix(text: str, prefix: str | None) -> str:
    return text[len(prefix):] if prefix and text.startswith(prefix) else text


def render_examples(data: UserData, tokenizer=None) -> list[Example]:
    """The proxy's view of every record: a prompt and a response (:class:`~.records.Example`).

    ``instruction`` records keep the Alpaca template (``Example.prompt`` unset, or the
    with-input template); ``prompt`` records use their prompt verbatim; ``messages`` records are
    rendered with ``tokenizer``'s chat template: the prompt is the template over every turn but
    the last with the generation prompt, the response what the full conversation adds to it (its
    end-of-turn text; an EOS text at its end is dropped, as the tokenization appends EOS).

    Raises:
        ValueError: ``messages`` data with a tokenizer that has no chat template, or whose
            template does not render the conversation as the prompt followed by the answer.
    """
    f = data.fields
    out = []
    if data.format == "messages":
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                "`--data` holds chat `messages`, but the proxy's tokenizer has no chat template to "
                "render them; give a proxy whose tokenizer has one (an instruct model, e.g. "
                "smollm2-135m-instruct), or `--proxy scratch` (its tokenizer gets a ChatML "
                "template)."
            )
        bos = getattr(tokenizer, "bos_token", None)
        eos = getattr(tokenizer, "eos_token", None)
    for i, (rec, line, source) in enumerate(zip(data.records, data.lines, data.sources,
                                                 strict=True)):  # fmt: skip
        if data.format == "instruction":
            extra = rec.get(f.input)
            prompt = (ALPACA_WITH_INPUT.format(instruction=rec[f.instruction], input=extra)
                      if extra else None)  # fmt: skip
            out.append(Example(rec[f.instruction], rec[f.output], source, i, prompt=prompt))
        elif data.format == "prompt":
            out.append(Example(rec[f.prompt], rec[f.completion], source, i,
                               prompt=rec[f.prompt]))  # fmt: skip
        else:
            msgs = rec[f.messages]
            head = tokenizer.apply_chat_template(msgs[:-1], tokenize=False,
                                                 add_generation_prompt=True)  # fmt: skip
            full = tokenizer.apply_chat_template(msgs, tokenize=False)
            if not full.startswith(head) or len(full) == len(head):
                raise ValueError(
                    f"{data.path}:{line}: the proxy's chat template does not render the "
                    "conversation as its prompt followed by the assistant's answer; use a proxy "
                    "with a standard template (ChatML, Llama, ...)."
                )
            response = full[len(head):].rstrip()
            if eos and response.endswith(eos) and len(response) > len(eos):
                response = response[: -len(eos)].rstrip()
            own_bos = bool(bos) and head.startswith(bos)  # the template writes BOS itself
            out.append(Example(msgs[-2]["content"], response, source, i, prompt=head,
                               prompt_special_tokens=not own_bos))  # fmt: skip
    return out


def write_mixture(
    path: str | os.PathLike,
    data: UserData,
    counts: Sequence[int],
    *,
    weight_field: str | None = None,
) -> Path:
    """Write the upsampled training set as JSONL, each record in its own layout (atomically).

    Args:
        path: the ``.jsonl`` file.
        data: the records read.
        counts: per record, how many times it appears (``1 + factor`` for a selected one), or
            with ``weight_field`` its weight.
        weight_field: write every record once with its count in this field, instead of repeats.

    Returns:
        ``path``: ``sum(counts)`` lines (``len(data)`` with ``weight_field``), records in file
        order, the copies of a record right after it.

    Raises:
        ValueError: ``weight_field`` is already a field of the records.
    """
    from sims.runtime.io import atomic_path

    if len(counts) != len(data):
        raise ValueError(f"`counts` has {len(counts)} entries for {len(data)} records.")
    if weight_field is not None and any(weight_field in r for r in data.records[:1000]):
        raise ValueError(
            f"the records already have a field {weight_field!r}; choose another "
            "`--weight-field`."
        )
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for rec, c in zip(data.records, counts, strict=True):
            if weight_field is not None:
                fh.write(json.dumps({**rec, weight_field: int(c)}, ensure_ascii=False) + "\n")
                continue
            line = json.dumps(rec, ensure_ascii=False) + "\n"
            fh.write(line * int(c))
    return Path(path)
