"""`--container IMAGE` written as each runtime reads it, from the runtimes' documented syntax (enroot's image URI
`[USER@][REGISTRY#]IMAGE[:TAG]` or a squashfs path for pyxis; a `.sif` path or a `docker://`, `oras://`,
`library://` URI for apptainer), and the generated job script carrying that form."""

from pathlib import Path

import pytest

from smolalign.errors import SmolalignError
from smolalign.slurm.container import image_reference

# (as given, pyxis, apptainer)
IMAGES = [
    ("smolalign:1", "smolalign:1", "docker://smolalign:1"),  # Docker Hub
    ("org/smolalign:1", "org/smolalign:1", "docker://org/smolalign:1"),
    ("docker.io/org/smolalign:1", "org/smolalign:1", "docker://org/smolalign:1"),
    ("ghcr.io/org/smolalign:1", "ghcr.io#org/smolalign:1", "docker://ghcr.io/org/smolalign:1"),
    ("docker://ghcr.io/org/smolalign:1", "ghcr.io#org/smolalign:1", "docker://ghcr.io/org/smolalign:1"),
    ("nvcr.io/nvidia/pytorch:25.01-py3", "nvcr.io#nvidia/pytorch:25.01-py3", "docker://nvcr.io/nvidia/pytorch:25.01-py3"),
    ("registry.example:5000/team/img", "registry.example:5000#team/img", "docker://registry.example:5000/team/img"),
    ("localhost/img:dev", "localhost#img:dev", "docker://localhost/img:dev"),
    ("ghcr.io#org/smolalign:1", "ghcr.io#org/smolalign:1", "docker://ghcr.io/org/smolalign:1"),  # enroot's own form
]


@pytest.mark.parametrize(("given", "pyxis", "apptainer"), IMAGES)
def test_registry_images_as_each_runtime_reads_them(given, pyxis, apptainer):
    assert image_reference(given, "pyxis") == pyxis
    assert image_reference(given, "apptainer") == apptainer


def test_local_images_and_other_schemes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert image_reference("images/smolalign.sqsh", "pyxis") == str(tmp_path / "images" / "smolalign.sqsh")
    assert image_reference("smolalign.sif", "apptainer") == str(tmp_path / "smolalign.sif")
    for uri in ("oras://ghcr.io/org/smolalign:1", "library://org/default/smolalign:1"):
        assert image_reference(uri, "apptainer") == uri
        with pytest.raises(SmolalignError, match="use --container-runtime apptainer"):
            image_reference(uri, "pyxis")
    with pytest.raises(SmolalignError, match="a sif file is not an image pyxis runs"):
        image_reference("smolalign.sif", "pyxis")
    with pytest.raises(SmolalignError, match="a sqsh file is not an image apptainer runs"):
        image_reference("smolalign.sqsh", "apptainer")


def test_the_job_script_pulls_a_ghcr_image_from_ghcr(cli, write_recipe, tiny_dir, tmp_path, monkeypatch):
    from tiny_models import chat_rows, write_jsonl

    monkeypatch.chdir(tmp_path)
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 128, "max_steps": 1}})
    for runtime, expected in (("pyxis", "--container-image='ghcr.io#org/smolalign:1' "),  # quoted: a # in it
                              ("apptainer", " docker://ghcr.io/org/smolalign:1 ")):
        script = tmp_path / f"{runtime}.sbatch"
        code, out, err = cli("launch", "slurm", str(recipe), "--nodes", "1", "--script", str(script), "--container",
                             "docker://ghcr.io/org/smolalign:1", "--container-runtime", runtime)
        assert code == 0, err
        text = Path(script).read_text()
        assert expected in text
