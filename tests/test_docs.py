"""The documentation: the site builds strictly, its reference pages show what the code has, the
notebooks are rendered with their outputs, the README stays short with working links, and the
code blocks marked ``<!-- test: runs -->`` run against a local S3 endpoint."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from s3commit_sdk import errors
from s3commit_sdk.cli import build_parser
from s3commit_sdk.options import REGISTRY
from s3commit_sdk.testing.sandbox import S3Sandbox

ROOT = Path(__file__).resolve().parents[1]
RUNS = "<!-- test: runs -->"
BLOCK = re.compile(r"^<!-- test: runs -->\n```(python|bash)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """``make docs``'s build, strict: a warning (a broken link, a missing name) fails it."""
    pytest.importorskip("mkdocs", reason="the docs extra (make test installs it)")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-4000:]
    assert "WARNING" not in build.stderr, build.stderr[-4000:]
    return out


def page(site: Path, name: str) -> str:
    return html.unescape((site / name / "index.html").read_text())


def nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text()
    nav = text[text.index("\nnav:") :]
    return re.findall(r":\s+(\S+\.(?:md|ipynb))$", nav, re.MULTILINE)


@pytest.mark.slow
def test_every_page_of_the_navigation_is_built(site):
    pages = nav_pages()
    assert len(pages) >= 30
    for source in pages:
        stem = source.rsplit(".", 1)[0]
        built = site / "index.html" if stem == "index" else site / stem / "index.html"
        assert built.is_file(), source


@pytest.mark.slow
def test_the_options_page_lists_every_option_with_its_s3a_name(site):
    text = page(site, "reference/options")
    for spec in REGISTRY:
        assert spec.name in text and spec.hadoop_name in text, spec.name


@pytest.mark.slow
def test_the_cli_page_is_every_commands_help(site):
    text = page(site, "reference/cli")
    parser = build_parser()
    commands = [
        action.choices
        for action in parser._actions
        if hasattr(action, "choices") and action.choices
    ]
    names = [name for choices in commands if isinstance(choices, dict) for name in choices]
    assert {"uploads", "success", "recover", "abort", "lifecycle"} <= set(names)
    for name in names:
        assert f"usage: s3commit {name}" in text, name


@pytest.mark.slow
def test_the_errors_page_names_every_error_type_and_visible_value(site):
    text = page(site, "reference/errors")
    for name, value in vars(errors).items():
        if isinstance(value, type) and issubclass(value, errors.S3CommitError):
            assert f"{name}" in text, name
    for key in errors.VISIBLE:
        assert key in text


@pytest.mark.slow
def test_the_api_page_is_generated_from_the_docstrings(site):
    text = page(site, "reference/api")
    assert "write_committed" in text and "conflict_mode" in text
    from s3commit_sdk.api import write_committed

    first_line = (write_committed.__doc__ or "").strip().splitlines()[0].replace("``", "")
    shown = re.sub(r"<[^>]+>", "", text)  # the docstring's literals are <code> elements
    assert " ".join(first_line.split()) in " ".join(shown.split())


@pytest.mark.slow
def test_the_notebooks_are_rendered_with_their_stored_outputs(site):
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text())["cells"]
        outputs = [
            line.strip()
            for cell in cells
            for output in cell.get("outputs", [])
            if output.get("output_type") == "stream"
            for line in "".join(output["text"]).splitlines()
            if len(line.strip()) > 8
        ]
        assert outputs, notebook.name
        assert outputs[0] in page(site, f"notebooks/{notebook.stem}"), notebook.name


def test_the_readme_is_short_and_its_links_exist():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target


def marked_blocks() -> list[tuple[str, str, str]]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [
        (str(path.relative_to(ROOT)), language, code)
        for path in files
        if RUNS in path.read_text()
        for language, code in BLOCK.findall(path.read_text())
    ]


def test_some_blocks_of_the_docs_are_marked_to_run():
    marked = {path for path, _, _ in marked_blocks()}
    assert {
        "README.md",
        "docs/guides/pending-uploads.md",
        "docs/guides/recovery.md",
        "docs/guides/databricks.md",
        "docs/guides/emr.md",
    } <= marked
    for path in marked:  # a marker whose block did not parse would be skipped silently
        assert (ROOT / path).read_text().count(RUNS) == sum(
            p == path for p, _, _ in marked_blocks()
        )


class _SecretScopes:
    """Databricks' ``dbutils.secrets`` for the guide's blocks: one scope holding the local
    endpoint's keys."""

    def __init__(self, env: dict[str, str]) -> None:
        self._keys = {
            ("s3", "access_key"): env["AWS_ACCESS_KEY_ID"],
            ("s3", "secret_key"): env["AWS_SECRET_ACCESS_KEY"],
        }

    def get(self, scope: str, key: str) -> str:
        return self._keys[(scope, key)]


def _platform_names(env: dict[str, str]) -> dict:
    """What a cluster guide's blocks take from their platform: a DataFrame ``df`` (pandas here:
    ``write_committed`` takes it as it takes Spark's) and Databricks' ``dbutils``."""
    import pandas as pd

    df = pd.DataFrame({"id": range(6), "day": ["2026-11-21", "2026-11-22"] * 3})
    return {"df": df, "dbutils": SimpleNamespace(secrets=_SecretScopes(env))}


@pytest.mark.parametrize("path", sorted({path for path, _, _ in marked_blocks()}))
def test_the_marked_code_blocks_run(path, tmp_path, monkeypatch):
    """A page's marked blocks run in order, Python in one namespace, shell commands with the
    venv's ``s3commit`` on PATH, against a local S3 endpoint holding the bucket ``bucket``.
    The cluster guides' blocks get the names their platform gives (:func:`_platform_names`)."""
    monkeypatch.chdir(tmp_path)
    with S3Sandbox(bucket="bucket") as sandbox:
        env = {**os.environ, **sandbox.env}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
        namespace: dict = {"__name__": "__docs__"}
        if path.startswith("docs/guides/"):
            namespace.update(_platform_names(env))
        for _, language, code in (block for block in marked_blocks() if block[0] == path):
            if language == "python":
                exec(compile(code, f"{path} (a marked block)", "exec"), namespace)
            else:
                run = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", code],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                assert run.returncode == 0, f"{path}:\n{code}\n{run.stdout}{run.stderr}"


@pytest.mark.slow
@pytest.mark.browser
def test_the_site_in_a_browser_navigates_and_searches(site, tmp_path):
    """The built site served on 127.0.0.1 in Debian's chromium: the home page, a how-to reached
    through the navigation, and the reference of ``write_committed`` found by the site's search.
    Their screenshots go to ``docs/screenshots/``."""
    if os.environ.get("S3COMMIT_SKIP_BROWSER") == "1":
        pytest.skip("S3COMMIT_SKIP_BROWSER=1")
    playwright = pytest.importorskip("playwright.sync_api")
    shots = ROOT / "docs" / "screenshots"
    shots.mkdir(exist_ok=True)
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", site],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N (...)"
        port = re.search(r"port (\d+)", line).group(1)
        base = f"http://127.0.0.1:{port}"
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(base + "/")
            assert page.locator("h1").first.inner_text().rstrip("¶") == "s3commit_sdk"
            page.screenshot(path=str(shots / "site-home.png"))
            page.get_by_role("link", name="Databricks").first.click()
            page.wait_for_url("**/guides/databricks/")
            assert page.locator("h1").first.inner_text().rstrip("¶") == "Databricks"
            page.screenshot(path=str(shots / "site-guide-databricks.png"))
            page.keyboard.press("/")  # Material's shortcut to the search box
            page.keyboard.type("Python API", delay=20)
            page.locator(".md-search-result__meta", has_text="matching").wait_for()
            found = page.locator("a.md-search-result__link").evaluate_all(
                "links => links.map(link => link.href)"
            )
            assert any("/reference/api/" in href for href in found), found
            page.goto(base + "/reference/api/")
            assert "s3commit_sdk.write_committed" in page.inner_text("body")
            page.screenshot(path=str(shots / "site-reference-write_committed.png"))
            browser.close()
    finally:
        server.terminate()
        server.wait()
