"""A Hugging Face cache as a machine that once downloaded some Hub repositories holds it.

``huggingface_hub`` keeps each downloaded repository under ``$HF_HOME/hub`` as
``{models,datasets}--ORG--NAME/`` with ``blobs/<hash>`` (the file contents),
``snapshots/<commit>/<path>`` (links to the blobs, the repository's own file layout) and
``refs/main`` (the commit ``main`` pointed to). ``datasets.load_dataset`` with
``HF_HUB_OFFLINE`` set reads neither: it reloads the tables it built when it loaded the
dataset online, under ``$HF_HOME/datasets/ORG___NAME/<config>/<version>/<commit>/``. A
dataset here is therefore put in both, the second built by ``datasets`` itself from the
snapshot's files with the builder arguments an online load uses (repository id, dataset name,
the commit as hash), so an offline load finds what it would have found after a real download.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"
"""The commit ``refs/main`` names in every repository built here (40 hex digits)."""


def _repo_folder(hub: Path, kind: str, repo_id: str) -> Path:
    """``hub/models--ORG--NAME`` (or ``datasets--``), as ``huggingface_hub`` names it."""
    return hub / f"{kind}s--{repo_id.replace('/', '--')}"


def add_files(hub: Path, kind: str, repo_id: str, files: dict[str, bytes]) -> Path:
    """Put ``files`` (path in the repository -> contents) into the cache as a snapshot of
    ``repo_id`` at :data:`COMMIT`, each a relative link to its blob; the snapshot folder."""
    folder = _repo_folder(hub, kind, repo_id)
    snapshot = folder / "snapshots" / COMMIT
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "main").write_text(COMMIT)
    for name, data in files.items():
        blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return snapshot


class HubCache:
    """A Hugging Face cache under ``home`` (``$HF_HOME``) to put Hub repositories into."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.hub = home / "hub"
        """``$HF_HUB_CACHE``: ``huggingface_hub``'s repositories."""
        self.datasets = home / "datasets"
        """``$HF_DATASETS_CACHE``: the tables ``datasets`` built."""

    def model(self, repo_id: str, model_dir: Path) -> Path:
        """Cache the model saved in ``model_dir`` (``save_pretrained`` output) as ``repo_id``;
        its snapshot folder."""
        files = {p.name: p.read_bytes() for p in sorted(model_dir.iterdir()) if p.is_file()}
        return add_files(self.hub, "model", repo_id, files)

    def dataset(
        self,
        repo_id: str,
        files: dict[str, bytes],
        configs: tuple[str | None, ...] | None = (None,),
    ) -> Path:
        """Cache the dataset repository ``repo_id`` holding ``files`` (data files, and a
        ``README.md`` whose YAML may name configs) and, for each of ``configs`` (``None``: the
        default), the tables ``datasets`` builds from it, as an online ``load_dataset`` leaves
        them (``configs=None``: none, as ``huggingface-cli download`` leaves a dataset); its
        snapshot folder."""
        snapshot = add_files(self.hub, "dataset", repo_id, files)
        for config in configs or ():
            _prepare(self.datasets, repo_id, snapshot, config)
        return snapshot


def use(cache: HubCache, monkeypatch) -> None:
    """Point ``huggingface_hub``, ``transformers``, ``datasets`` and the commands a test starts
    (``HF_HOME``) at ``cache`` for the test."""
    import datasets
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HOME", str(cache.home))
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE"):
        monkeypatch.delenv(name, raising=False)  # each would win over HF_HOME
    monkeypatch.setattr(constants, "HF_HOME", str(cache.home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache.hub))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache.datasets)


def _prepare(cache: Path, repo_id: str, snapshot: Path, config: str | None) -> None:
    """Build ``repo_id``'s tables for ``config`` in the ``datasets`` cache from its snapshot,
    named as ``datasets``' Hub loader names them (repository id, dataset name, commit)."""
    import datasets
    from datasets.load import LocalDatasetModuleFactory, get_dataset_builder_class
    from datasets.naming import camelcase_to_snakecase

    module = LocalDatasetModuleFactory(str(snapshot)).get_module()
    name = camelcase_to_snakecase(repo_id.split("/")[-1])
    builder_cls = get_dataset_builder_class(module, dataset_name=name)
    # built as a local folder (a repo_id makes it check that its files are hf:// URLs), then
    # given the repository's id, which names its cache folder ORG___NAME as online
    builder = builder_cls(
        cache_dir=str(cache),
        config_name=config,
        hash=COMMIT,
        dataset_name=name,
        base_path=str(snapshot),
    )
    builder.repo_id = repo_id
    builder._cache_dir = builder._build_cache_dir()
    builder.download_and_prepare(download_mode=datasets.DownloadMode.FORCE_REDOWNLOAD)
