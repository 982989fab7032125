"""MkDocs hook: the pages show the repository's committed figures where they lie.

A page links a figure by its path in the repository (``../../benchmarks/results/x.png`` from
docs/results/), so the link works on a code host and in an editor. Such a file is outside
``docs_dir``, where MkDocs would not find it: this hook adds each image a page links outside
docs/ to the site (under its repository path) and points the page's link at that copy. Any
other link outside docs/ is left alone, so ``mkdocs build --strict`` still reports it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
IMAGES = (".png", ".svg", ".jpg", ".jpeg", ".gif")
LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s#]+)([^)]*\))")


def _outside(page_uri: str, target: str, docs: str) -> str | None:
    """The repository path of an image ``target`` that a page links outside docs/, else None."""
    if "://" in target or target.startswith(("/", "mailto:")) or not target.endswith(IMAGES):
        return None
    repo_path = posixpath.normpath(posixpath.join(docs, posixpath.dirname(page_uri), target))
    if repo_path.startswith(("../", docs + "/")) or not (ROOT / repo_path).is_file():
        return None
    return repo_path


def on_files(files: Files, config) -> Files:
    docs = Path(config["docs_dir"]).resolve().relative_to(ROOT).as_posix()
    for page in [f for f in files if f.src_uri.endswith(".md")]:
        for m in LINK.finditer(Path(page.abs_src_path).read_text()):
            repo_path = _outside(page.src_uri, m.group(2), docs)
            if repo_path and files.get_file_from_path(repo_path) is None:
                files.append(
                    File(repo_path, str(ROOT), config["site_dir"], config["use_directory_urls"])
                )
    return files


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    docs = Path(config["docs_dir"]).resolve().relative_to(ROOT).as_posix()

    def relink(m: re.Match) -> str:
        repo_path = _outside(page.file.src_uri, m.group(2), docs)
        if repo_path is None:
            return m.group(0)
        here = posixpath.dirname(page.file.src_uri) or "."
        return m.group(1) + posixpath.relpath(repo_path, here) + m.group(3)

    return LINK.sub(relink, markdown)
