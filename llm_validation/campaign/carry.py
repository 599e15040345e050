"""Carry what a GPU machine lacks: wheels of missing packages, and big files in checksummed parts.

The GPU machines this project is lent now and then (issue 21) run a fixed image (Python 3.12,
torch 2.11, transformers 5.17, jax, xarray, ...; :data:`IMAGE_PACKAGES`) and reach no package
registry. Each command carries at most 64 MiB of the working tree (git-ignored paths only when
named, at most 8 of them); files written there stay only while the machine is warm (about 30 s
between commands). Three pieces make the project run there:

* **Wheels** (:data:`WHEELS`): the packages the project needs that the image lacks
  (``math-verify`` and its parser, ``gguf``, ``netCDF4``) are downloaded *here* by
  :func:`download_wheels` into an ignored folder and carried; there, :func:`activate_wheels`
  unpacks them into a site folder and puts it on ``sys.path`` (and ``PYTHONPATH``, for
  subprocesses). Nothing is installed from a registry there.
* **Parts** of a file too big for one command (the SmolLM2-135M-Instruct GGUF, 98 MB):
  :func:`split_file` cuts it into parts with a SHA-256 manifest, consecutive commands carry
  one part each, and :func:`assemble` verifies every part and the whole before the file is used;
  a missing or corrupt part is a :class:`CarryError` that names it.
* **Image emulation** for rehearsals here: :class:`ImageFinder` hides every installed
  distribution that is not on the image, except what the carried site folder provides, so an
  import that would fail there fails here too.

Examples:
    >>> normalize("netCDF4"), normalize("latex2sympy2_extended")
    ('netcdf4', 'latex2sympy2-extended')
    >>> "torch" in IMAGE_PACKAGES and "math-verify" not in IMAGE_PACKAGES
    True
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.abc
import importlib.machinery
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

__all__ = [
    "CarryError",
    "IMAGE_PACKAGES",
    "WHEELS",
    "MIB",
    "TREE_LIMIT",
    "MAX_CARRY_PATHS",
    "MAX_COMMAND_CHARS",
    "normalize",
    "download_wheels",
    "extract_wheel",
    "activate_wheels",
    "image_closure",
    "blocked_modules",
    "ImageFinder",
    "emulate_image",
    "Part",
    "Manifest",
    "sha256_file",
    "split_file",
    "read_manifest",
    "check_parts",
    "assemble",
    "tree_bytes",
    "path_bytes",
    "project_modules",
    "import_check_main",
]

MIB = 2**20
#: What one device command may carry in all (tracked and untracked files plus carried paths).
TREE_LIMIT = 64 * MIB
#: Ignored paths one command may name in ``carry``.
MAX_CARRY_PATHS = 8
#: Characters of one device command.
MAX_COMMAND_CHARS = 2000

#: Distributions on the GPU machines' image ('cuda'), as read on 2026-11-17
#: (/work/.library/device/KINDS.md); names normalized by :func:`normalize`.
IMAGE_PACKAGES = frozenset(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
    botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy
    coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython
    diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic
    frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
    hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib
    jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator
    lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
    mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx
    ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc
    nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand
    nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13
    nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
    opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging
    pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf
    psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest
    pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
    pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core
    scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools
    shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
    tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz
    torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers
    treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug
    wheel wrapt xarray xxhash yarl zipp""".split()
)

#: Wheels the project needs on the image (pinned to the versions the suite ran with here; gguf
#: is not installed here and is exercised through the carried wheel in the rehearsal).
#: ``math-verify`` (answer scoring) needs ``latex2sympy2_extended`` and ``antlr4``; ``gguf``
#: reads the carried SmolLM2 file; ``netCDF4`` (with ``cftime``) writes the NetCDF results.
WHEELS = (
    "math-verify==0.9.0",
    "latex2sympy2_extended==1.11.0",
    "antlr4-python3-runtime==4.13.2",
    "gguf==0.19.0",
    "netCDF4==1.7.5.1.post1",
    "cftime==1.6.6.1",
)

#: ``pip download`` platform tags of the image (x86-64, glibc manylinux).
_PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)


class CarryError(ValueError):
    """A carried file or wheel is missing, corrupt or too big; the message says what to do."""


def normalize(name: str) -> str:
    """A distribution name normalized as PEP 503 does (lower case, ``-`` for runs of ``-_.``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


# ------------------------------------------------------------------------------------ wheels


def download_wheels(
    dest: str | os.PathLike, specs: Sequence[str] = WHEELS, *, python_version: str = "3.12"
) -> list[Path]:
    """Download ``specs`` as wheels for the image (CPython ``python_version``, x86-64).

    Runs ``pip download --no-deps --only-binary=:all:`` here (the machine has no registry).
    Each spec must be pinned (``name==version``), so what travels is what was tested.

    Returns:
        The wheel files in ``dest`` after the download.

    Raises:
        CarryError: for an unpinned spec, or when pip fails (its last lines in the message).
    """
    loose = [s for s in specs if "==" not in s]
    if loose:
        raise CarryError(f"wheel specs must be pinned as name==version; got {loose}.")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--implementation",
        "cp",
        "-d",
        str(dest),
    ]
    for p in _PLATFORMS:
        cmd += ["--platform", p]
    proc = subprocess.run([*cmd, *specs], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise CarryError(f"pip download of {list(specs)} failed: {tail}")
    return sorted(dest.glob("*.whl"))


def _wheel_dist(wheel: Path) -> str:
    """The normalized distribution name of a wheel file (``name-version-...whl``)."""
    return normalize(wheel.name.split("-")[0])


def extract_wheel(wheel: str | os.PathLike, site: str | os.PathLike) -> Path:
    """Unpack ``wheel`` into the folder ``site`` as an installer would (purelib and platlib).

    A wheel's top level goes into site-packages as is; ``<name>.data/purelib`` and
    ``<name>.data/platlib`` are merged into it (scripts and headers are not needed). Members with
    absolute paths or ``..`` are refused. A marker file makes a second call a no-op.

    Returns:
        ``site`` as a Path.

    Raises:
        CarryError: for a file that is not a wheel (zip) or an unsafe member.
    """
    wheel, site = Path(wheel), Path(site)
    marker = site / f".extracted-{wheel.name}"
    if marker.exists():
        return site
    site.mkdir(parents=True, exist_ok=True)
    try:
        zf = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as exc:
        raise CarryError(f"{str(wheel)!r} is not a readable wheel ({exc}).") from None
    with zf:
        for info in zf.infolist():
            name = info.filename
            parts = Path(name).parts
            if name.startswith("/") or ".." in parts:
                raise CarryError(f"wheel {wheel.name} has an unsafe member {name!r}.")
            if info.is_dir():
                continue
            if len(parts) > 2 and parts[0].endswith(".data"):
                if parts[1] not in ("purelib", "platlib"):
                    continue
                rel = Path(*parts[2:])
            else:
                rel = Path(name)
            target = site / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
    marker.write_text(sha256_file(wheel) + "\n")
    return site


def activate_wheels(wheels: str | os.PathLike, site: str | os.PathLike) -> list[str]:
    """Unpack every wheel in the folder ``wheels`` into ``site`` and put ``site`` on the path.

    ``site`` goes first on ``sys.path`` (this process and the ``spawn`` workers it starts) and on
    ``PYTHONPATH`` (subprocesses), so the carried versions win over any others.

    Returns:
        The normalized distribution names activated (empty when the folder has no wheels).

    Raises:
        CarryError: when two wheels of the same distribution are present (one must go).
    """
    files = sorted(Path(wheels).glob("*.whl"))
    seen: dict[str, str] = {}
    for w in files:
        d = _wheel_dist(w)
        if d in seen:
            raise CarryError(
                f"two wheels of {d} in {str(wheels)!r}: {seen[d]} and {w.name}; keep one."
            )
        seen[d] = w.name
    if not files:
        return []
    for w in files:
        extract_wheel(w, site)
    site_s = str(Path(site).resolve())
    if site_s not in sys.path:
        sys.path.insert(0, site_s)
    old = os.environ.get("PYTHONPATH", "")
    if site_s not in old.split(os.pathsep):
        os.environ["PYTHONPATH"] = site_s + (os.pathsep + old if old else "")
    importlib.invalidate_caches()
    return sorted(seen)


# --------------------------------------------------------------------------- image emulation


def image_closure(image: Iterable[str] = IMAGE_PACKAGES) -> set[str]:
    """The image's distributions plus what their installed versions here require (transitively).

    The versions installed here may need packages the image's versions do not (a newer
    ``huggingface_hub`` needs ``httpx2``); those are not the project's business, so they count as
    present. Only requirements without an ``extra`` marker (evaluated for this interpreter) count.
    """
    import importlib.metadata

    from packaging.requirements import InvalidRequirement, Requirement

    todo = [normalize(n) for n in image]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in reqs:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            todo.append(normalize(req.name))
    return seen


def blocked_modules(image: Iterable[str] = IMAGE_PACKAGES, *, own: str = "sbtheory") -> set[str]:
    """Top-level modules installed here that the image lacks (see :func:`image_closure`).

    ``own`` (this project, which travels as a source tree) is never blocked; a module that any
    present distribution provides (a shared namespace) is not blocked either.
    """
    import importlib.metadata

    present = image_closure(image) | {normalize(own)}
    out = set()
    for module, dists in importlib.metadata.packages_distributions().items():
        if not any(normalize(d) in present for d in dists):
            out.add(module)
    return out


class ImageFinder(importlib.abc.MetaPathFinder):
    """``sys.meta_path``'s path finder, blind to the modules the image lacks.

    It stands in for :class:`importlib.machinery.PathFinder`: every import goes through it
    unchanged, except the top-level modules in ``blocked``, which are looked up only in
    ``allowed`` (the carried site folder). So ``importlib.util.find_spec`` answers ``None`` for a
    module the image lacks, as it would there, and ``import`` raises ``ModuleNotFoundError``.
    """

    def __init__(
        self,
        blocked: Iterable[str],
        allowed: Sequence[str | os.PathLike] = (),
        image: Iterable[str] = IMAGE_PACKAGES,
    ):
        self.blocked = frozenset(blocked)
        self.allowed = [str(a) for a in allowed]
        self.present = frozenset(image_closure(image))

    def find_spec(self, fullname, path=None, target=None):
        """The path finder's spec; for a blocked top-level module, from ``allowed`` only."""
        if path is None and fullname in self.blocked:
            if not self.allowed:
                return None
            return importlib.machinery.PathFinder.find_spec(fullname, self.allowed, target)
        return importlib.machinery.PathFinder.find_spec(fullname, path, target)

    def find_distributions(self, context=None):
        """Installed distributions (``importlib.metadata``) on the image or in ``allowed``."""
        import importlib.metadata

        context = context or importlib.metadata.DistributionFinder.Context()
        for dist in importlib.machinery.PathFinder.find_distributions(context):
            name = normalize(dist.metadata["Name"] or "")
            where = str(getattr(dist, "_path", ""))
            if (
                name in self.present
                or name == "sbtheory"
                or any(where.startswith(a) for a in self.allowed)
            ):
                yield dist

    def invalidate_caches(self):
        """Forward to the path finder."""
        importlib.machinery.PathFinder.invalidate_caches()


@contextlib.contextmanager
def emulate_image(
    allowed: Sequence[str | os.PathLike] = (), blocked: Iterable[str] | None = None
) -> Iterator[ImageFinder]:
    """Within the block, import as the image would: only its packages plus ``allowed``.

    Replaces the path finder on ``sys.meta_path`` by an :class:`ImageFinder` and restores it
    afterwards. Modules already imported stay imported, so call it early (a fresh process).

    Raises:
        RuntimeError: if a blocked module was imported before (the emulation would be void).
    """
    blocked = blocked_modules() if blocked is None else set(blocked)
    early = sorted(m for m in blocked if m in sys.modules)
    if early:
        raise RuntimeError(
            f"image emulation must start before these modules are imported: {early[:8]}."
        )
    finder = ImageFinder(blocked, allowed)
    old = list(sys.meta_path)
    sys.meta_path[:] = [finder if m is importlib.machinery.PathFinder else m for m in sys.meta_path]
    importlib.invalidate_caches()
    try:
        yield finder
    finally:
        sys.meta_path[:] = old
        importlib.invalidate_caches()


# ------------------------------------------------------------------------------------- parts


@dataclasses.dataclass(frozen=True)
class Part:
    """One part of a split file: its file name, size in bytes and SHA-256."""

    name: str
    size: int
    sha256: str


@dataclasses.dataclass(frozen=True)
class Manifest:
    """What :func:`split_file` wrote: the whole file's name, size and SHA-256, and its parts."""

    name: str
    size: int
    sha256: str
    parts: tuple[Part, ...]

    def to_dict(self) -> dict:
        """JSON-ready."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Manifest:
        """Inverse of :meth:`to_dict`."""
        return cls(d["name"], int(d["size"]), d["sha256"], tuple(Part(**p) for p in d["parts"]))


MANIFEST = "manifest.json"


def sha256_file(path: str | os.PathLike, block: int = 1 << 22) -> str:
    """Hex SHA-256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(block):
            h.update(chunk)
    return h.hexdigest()


def split_file(
    path: str | os.PathLike, dest: str | os.PathLike, *, part_bytes: int | Sequence[int]
) -> Manifest:
    """Cut ``path`` into parts in the folder ``dest``, with a manifest.

    ``part_bytes``: every part's largest size, or each part's size in turn (the device plan
    balances the bytes each command carries; they must cover the file). Writes
    ``dest/part-01``, ``dest/part-02``, ... and ``dest/manifest.json`` (the whole file's name,
    size and SHA-256 and each part's). Old parts in ``dest`` are removed first.

    Raises:
        CarryError: for a missing file, a size below 1 MiB, or sizes that do not cover the file.
    """
    path, dest = Path(path), Path(dest)
    if not path.is_file():
        raise CarryError(f"`path` {str(path)!r} is not a file.")
    sizes = [part_bytes] if isinstance(part_bytes, int) else list(part_bytes)
    if not sizes or any(not isinstance(b, int) or b < MIB for b in sizes):
        raise CarryError(f"`part_bytes` must be ints >= 1 MiB; got {part_bytes!r}.")
    if not isinstance(part_bytes, int) and sum(sizes) < path.stat().st_size:
        raise CarryError(
            f"`part_bytes` {sizes} do not cover {path.name}'s {path.stat().st_size} bytes."
        )
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("part-*"):
        old.unlink()
    parts, whole = [], hashlib.sha256()
    with path.open("rb") as f:
        i = 0
        while chunk := f.read(sizes[min(i, len(sizes) - 1)]):
            i += 1
            whole.update(chunk)
            name = f"part-{i:02d}"
            (dest / name).write_bytes(chunk)
            parts.append(Part(name, len(chunk), hashlib.sha256(chunk).hexdigest()))
    man = Manifest(path.name, path.stat().st_size, whole.hexdigest(), tuple(parts))
    (dest / MANIFEST).write_text(json.dumps(man.to_dict(), indent=2) + "\n")
    return man


def read_manifest(folder: str | os.PathLike) -> Manifest:
    """The manifest in ``folder``.

    Raises:
        CarryError: when it is missing or unreadable.
    """
    p = Path(folder) / MANIFEST
    try:
        return Manifest.from_dict(json.loads(p.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CarryError(
            f"no readable manifest at {str(p)!r} ({type(exc).__name__}); carry the folder's "
            f"{MANIFEST} with every part."
        ) from None


def check_parts(folder: str | os.PathLike, *, hash_parts: bool = True) -> dict[str, list[str]]:
    """Which parts listed in ``folder``'s manifest are there and intact.

    Returns:
        ``{"ok": [...], "missing": [...], "corrupt": [...]}`` (part names; a part of the wrong
        size or checksum is corrupt).
    """
    folder = Path(folder)
    man = read_manifest(folder)
    out: dict[str, list[str]] = {"ok": [], "missing": [], "corrupt": []}
    for part in man.parts:
        p = folder / part.name
        if not p.is_file():
            out["missing"].append(part.name)
        elif p.stat().st_size != part.size or (hash_parts and sha256_file(p) != part.sha256):
            out["corrupt"].append(part.name)
        else:
            out["ok"].append(part.name)
    return out


def assemble(folder: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Rebuild the file split into ``folder`` at ``dest``, verifying every part and the whole.

    Idempotent: a ``dest`` that already has the manifest's size and SHA-256 is returned as is.
    The file is written to a temporary sibling and renamed into place only once its SHA-256
    matches, so ``dest`` is never a partial or wrong file.

    Returns:
        ``dest`` as a Path.

    Raises:
        CarryError: naming the missing or corrupt parts (to carry again), or a whole-file
            checksum mismatch.
    """
    folder, dest = Path(folder), Path(dest)
    man = read_manifest(folder)
    if dest.is_file() and dest.stat().st_size == man.size and sha256_file(dest) == man.sha256:
        return dest
    state = check_parts(folder)
    if state["missing"] or state["corrupt"]:
        bad = []
        if state["missing"]:
            bad.append(f"missing {', '.join(state['missing'])}")
        if state["corrupt"]:
            bad.append(f"corrupt {', '.join(state['corrupt'])}")
        raise CarryError(
            f"cannot assemble {man.name}: {len(state['ok'])} of {len(man.parts)} parts in "
            f"{str(folder)!r} are intact ({'; '.join(bad)}); carry those parts again (the "
            "machine keeps earlier parts only while it stays warm)."
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    os.close(fd)
    try:
        h = hashlib.sha256()
        with open(tmp, "wb") as out:
            for part in man.parts:
                with open(folder / part.name, "rb") as f:
                    while chunk := f.read(1 << 22):
                        h.update(chunk)
                        out.write(chunk)
        if h.hexdigest() != man.sha256:
            raise CarryError(
                f"assembled {man.name} has SHA-256 {h.hexdigest()[:16]}..., not the manifest's "
                f"{man.sha256[:16]}...; carry all parts again."
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest


# ------------------------------------------------------------------------------------- sizes


def path_bytes(path: str | os.PathLike) -> int:
    """Bytes of a file, or of every file under a folder (0 when missing)."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    if p.is_dir():
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return 0


def tree_bytes(repo: str | os.PathLike) -> int:
    """Bytes of what every device command carries: tracked and untracked-not-ignored files.

    Raises:
        CarryError: when ``repo`` is not a git checkout.
    """
    proc = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        raise CarryError(f"{str(repo)!r} is not a git checkout: {proc.stderr.decode()[-200:]}")
    total = 0
    for name in set(proc.stdout.decode().split("\0")):
        p = Path(repo) / name
        if name and p.is_file():
            total += p.stat().st_size
    return total


# ------------------------------------------------------------------------------ import check

PACKAGES = ("sims", "theory", "llm_validation", "figures")


def project_modules(root: str | os.PathLike | None = None) -> list[str]:
    """Every module of the project's four packages (``__main__`` modules left out)."""
    import pkgutil

    root = Path(root) if root is not None else Path(__file__).resolve().parents[2]
    out = []
    for pkg in PACKAGES:
        out.append(pkg)
        for info in pkgutil.walk_packages([str(root / pkg)], prefix=f"{pkg}."):
            if not info.name.endswith("__main__"):
                out.append(info.name)
    return sorted(out)


def import_check_main() -> None:
    """Entry of the import check's subprocess (spec in ``$SBT_IMPORT_CHECK`` as JSON).

    Spec: ``{"modules": [...] or "all", "emulate": bool, "allowed": [folders]}``. Prints one
    JSON line ``{module: "ExcType: message"}`` with the modules that failed to import.
    """
    import importlib
    import traceback

    spec = json.loads(os.environ["SBT_IMPORT_CHECK"])
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    for a in spec.get("allowed", []):
        if a not in sys.path:
            sys.path.insert(0, a)
    ctx = emulate_image(spec["allowed"]) if spec.get("emulate") else contextlib.nullcontext()
    failures = {}
    with ctx:
        mods = project_modules() if spec["modules"] == "all" else spec["modules"]
        for m in mods:
            try:
                importlib.import_module(m)
            except BaseException as exc:  # noqa: BLE001 - SystemExit from a CLI module counts too
                last = traceback.format_exception_only(type(exc), exc)[-1].strip()
                failures[m] = last[:300]
    print(json.dumps(failures), flush=True)
