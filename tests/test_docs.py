"""The docs point at things that exist: every relative link of README.md and docs/*.md resolves
(to a file, and to a heading when it names one), every repository path they name (``arbor/...``,
``tests/...``, ``benchmarks/x.py``, globs like ``tests/arbor/campaign/test_parallel*.py`` and
``{a,b}`` alternatives) exists, and every heading of a page under docs/ that the code and the docs cite
is a heading of that page. Files move; a doc that still names the old place sends a reader (or an
agent) nowhere — docs/scale-out.md named ``tests/arbor/test_parallel*.py`` for a while after the
tests moved under ``tests/arbor/campaign/``."""

from __future__ import annotations

import functools
import glob
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
TOP = ("arbor", "agents", "sandbox", "search_tree", "skills", "campaigns", "tests", "benchmarks", "scripts", "docs")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# a path: a top-level folder, then names, globs and {a,b} alternatives; not inside a longer name
PATH = re.compile(r"(?<![\w./-])((?:%s)/(?:[\w.*/-]|\{[\w.,-]+\})*(?:[\w*]|\{[\w.,-]+\}))" % "|".join(TOP))
OUTPUT_FLAG = re.compile(r"(?:--out|-o|--save-result|--json-log|--before)[ =]$")  # --before: an earlier --out
# files the docs name as what a GPU run will write: none has been run and committed yet
NOT_YET_WRITTEN = {
    "benchmarks/results/gpu_suite.json": "scripts/gpu_suite.sh on a GPU host",
    "benchmarks/results/gpu_suite_run": "scripts/gpu_suite.sh on a GPU host (its work folder)",
    "benchmarks/results/triton_kernels_cuda.json": "scripts/gpu_check.sh on a GPU host",
    "benchmarks/results/eval_overhead_cuda.json": "scripts/gpu_check.sh on a GPU host",
}
CITE = re.compile(r"docs/([\w-]+\.md)#([\w-]+)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    h = re.sub(r"<[^>]+>|[`*~]", "", h)
    return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")


@functools.cache
def anchors(md: Path) -> set[str]:
    """The page's heading anchors (a repeated heading gets -1, -2, ...) and explicit <a id/name>."""
    out: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in md.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
        out.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line))
    return out


def expand(path: str) -> list[str]:
    """``a/{b,c}.py`` -> ``a/b.py``, ``a/c.py``."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [x for alt in m.group(1).split(",") for x in expand(path[:m.start()] + alt + path[m.end():])]


def exists(path: str) -> bool:
    path = path.rstrip("./")
    # an upper-case segment is a placeholder (benchmarks/results/NAME.json): any name will do
    path = "/".join(re.sub(r"^[A-Z][A-Z_]*(?=\.|$)", "*", seg) for seg in path.split("/"))
    if any(c in path for c in "*?["):
        return bool(glob.glob(str(REPO / path)))
    # a module named without its suffix (search_tree/__init__)
    return (REPO / path).exists() or (REPO / f"{path}.py").exists()


def named_paths(text: str) -> list[str]:
    """The repository paths a page names, less those it names as something a command writes
    (after ``--out``/``-o``, or a run's folder under ``arbor_runs/``)."""
    out = []
    for m in PATH.finditer(text):
        p = m.group(1)
        if text[m.end():m.end() + 1] == "<":  # a prefix and a placeholder: gpu_check_<host>.json
            p += "*"
        if OUTPUT_FLAG.search(text[max(0, m.start() - 16):m.start()]) or "arbor_runs" in p:
            continue
        out.append(p)
    return out


@pytest.mark.parametrize("md", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(md: Path):
    bad = []
    for target in LINK.findall(md.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (md.parent / path) if path else md
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}")
    assert not bad, f"{md.relative_to(REPO)}: " + "; ".join(bad)


@pytest.mark.parametrize("md", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_repository_path_named_exists(md: Path):
    missing = sorted({p for p in named_paths(md.read_text(encoding="utf-8"))
                      if p.rstrip("./") not in NOT_YET_WRITTEN and not all(exists(x) for x in expand(p))})
    assert not missing, f"{md.relative_to(REPO)} names paths that do not exist: {missing}"


def test_every_cited_doc_anchor_is_a_heading():
    """``docs/architecture.md#stopping`` in a docstring, a comment or another page."""
    bad = []
    sources = [*DOCS, *(p for top in TOP if (REPO / top).is_dir() for p in (REPO / top).rglob("*.py"))]
    for f in sources:
        if "__pycache__" in f.parts:
            continue
        for page, anchor in set(CITE.findall(f.read_text(encoding="utf-8", errors="replace"))):
            md = REPO / "docs" / page
            if anchor not in (anchors(md) if md.exists() else set()):
                bad.append(f"{f.relative_to(REPO)}: docs/{page}#{anchor}")
    assert not bad, "citations of headings that do not exist: " + ", ".join(sorted(bad))


def test_the_checks_themselves_can_fail():
    """A missing path, a missing heading and an output path are told apart."""
    assert not exists("tests/arbor/test_parallel*.py") and exists("tests/arbor/campaign/test_parallel*.py")
    assert expand("benchmarks/results/dev_subset_{before,after}/") == ["benchmarks/results/dev_subset_before/",
                                                                      "benchmarks/results/dev_subset_after/"]
    assert named_paths("run `x --out benchmarks/results/gen_before` then see benchmarks/none.py") == \
        ["benchmarks/none.py"]
    assert named_paths("writes benchmarks/results/gpu_check_<host>.json") == ["benchmarks/results/gpu_check_*"]
    assert slug("Does the GPU start inside the sandbox?") == "does-the-gpu-start-inside-the-sandbox"
    assert "stopping" in anchors(REPO / "docs" / "architecture.md")
