"""The per-user model cache: where it is, that workspaces share it, that writes are atomic."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from skillrl.policies import model_cache
from skillrl.policies.model_cache import (
    EMBEDDED_NAME,
    cache_dir,
    ensure_embedded_checkpoint,
    models_dir,
)


def test_cache_dir_follows_skillrl_cache_then_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SKILLRL_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir() == (tmp_path / "home" / ".cache" / "skillrl").resolve()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == (tmp_path / "xdg" / "skillrl").resolve()
    monkeypatch.setenv("SKILLRL_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == (tmp_path / "mine").resolve()
    assert models_dir() == (tmp_path / "mine" / "models").resolve()


def test_a_converted_embedded_model_in_the_cache_serves_every_workspace(tmp_path, monkeypatch):
    monkeypatch.setenv("SKILLRL_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "models" / EMBEDDED_NAME
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")

    def no_conversion(*args, **kwargs):
        raise AssertionError("converted again although the cache holds the model")

    monkeypatch.setattr(model_cache, "convert_gguf", no_conversion)
    for workspace in ("a", "b"):
        monkeypatch.setenv("SKILLRL_WORKSPACE", str(tmp_path / workspace))
        assert ensure_embedded_checkpoint() == folder.resolve()
        assert not (tmp_path / workspace / "models").exists()


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from skillrl.policies.model_cache import _save_atomically

    def write(folder):
        (folder / "model.safetensors").write_text(sys.argv[2])
        time.sleep(1.0)  # both writers are mid-write at once

    _save_atomically(Path(sys.argv[1]), write)
    """
)


def test_two_processes_converting_at_once_leave_one_complete_folder(tmp_path):
    target = tmp_path / "models" / EMBEDDED_NAME
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")  # an incomplete leftover of an old writer
    root = Path(__file__).resolve().parents[2]
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(target), name], env=env)
        for name in ("first", "second")
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    assert (target / "model.safetensors").read_text() in ("first", "second")
    assert not (target / "config.json").exists()
    assert sorted(p.name for p in target.parent.iterdir()) == [EMBEDDED_NAME]


@pytest.mark.slow
def test_converting_a_gguf_prints_no_progress_bars(tmp_path):
    """The first run converts the embedded model; the CLI says so in one line, no tqdm bars."""
    root = Path(__file__).resolve().parents[2]
    script = (
        "from skillrl.policies.model_cache import ensure_embedded_checkpoint, embedded_gguf_path\n"
        "import os\n"
        "assert embedded_gguf_path().exists()\n"
        "ensure_embedded_checkpoint()\n"
        "from transformers import modeling_gguf_pytorch_utils as r\n"
        "assert r.tqdm.__module__.startswith('tqdm')  # the reader gets its bar back\n"
    )
    env = {
        "PYTHONPATH": str(root),
        "PATH": "/usr/bin:/bin",
        "SKILLRL_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert "it/s" not in done.stderr and "Converting" not in done.stderr, done.stderr
    assert (tmp_path / "cache" / "models" / EMBEDDED_NAME / "model.safetensors").exists()


@pytest.mark.parametrize("content", [b"", b"GGU", b"not a gguf file at all, just text\n"])
def test_a_gguf_that_does_not_start_like_one_is_refused_before_anything_loads(tmp_path, content):
    from skillrl.policies.model_folders import check_model_path
    from skillrl_core.errors import ModelLoadError

    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelLoadError, match="is not a GGUF model"):
        check_model_path(str(path))


def test_a_truncated_gguf_is_one_model_load_error_naming_it(tmp_path):
    from skillrl.policies.model_cache import convert_gguf, embedded_gguf_path
    from skillrl_core.errors import ModelLoadError

    data = embedded_gguf_path().read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[: len(data) // 100])  # header intact, tensors cut off
    with pytest.raises(ModelLoadError, match="truncated or damaged") as raised:
        convert_gguf(path, tmp_path / "out")
    assert str(path) in str(raised.value) and not (tmp_path / "out").exists()
