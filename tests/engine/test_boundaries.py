"""The package's shape: one import name, an engine without Textual (the import contracts,
checked by `make lint`, hold the rest: pyproject.toml [tool.importlinter])."""
from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"crawltop": "crawltop", "core": "crawltop.core", "tui": "crawltop.tui",
           "cli": "crawltop.cli", "demo": "crawltop.demo"}

BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] == 'textual' or name.startswith(('crawltop.tui', 'crawltop.cli')):
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
import crawltop.core, crawltop.core.crawler
import pkgutil
for m in pkgutil.walk_packages(crawltop.core.__path__, 'crawltop.core.'):  # subpackages too
    __import__(m.name)
print('ok', sorted(k for k in sys.modules if k.startswith(('textual', 'crawltop.tui', 'crawltop.cli'))))
"""


def test_core_imports_without_textual() -> None:
    proc = subprocess.run([sys.executable, "-c", BLOCK], capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok []"
    count = subprocess.run([sys.executable, "-c", BLOCK.replace("print('ok',", "print(len([k for k in sys.modules "
                            "if k.startswith('crawltop.core.')]),")], capture_output=True, text=True, cwd="/")
    modules = len(list((ROOT / "core").rglob("*.py"))) - 1  # every module but core/__init__.py
    assert int(count.stdout.split()[0]) == modules, count.stdout  # every engine module was imported


def test_headless_cli_never_imports_textual() -> None:
    code = ("import sys; from crawltop.cli.main import build_parser; build_parser(); "
            "import crawltop.cli.headless, crawltop.cli.state_file; "
            "print(sorted(k for k in sys.modules if k.startswith(('textual', 'crawltop.tui'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            out[".".join((package, *parts))] = path
    return out


def test_no_absolute_imports_of_the_old_top_level_names() -> None:
    offenders = [f"{path}:{node.lineno}" for path in _modules().values()
                 for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.ImportFrom) and not node.level
                 and (node.module or "").split(".")[0] in ("core", "tui", "cli", "demo")]
    assert offenders == []


def test_wheel_holds_only_the_crawltop_package(tmp_path: Path) -> None:
    """Built from the tree (not the editable install): nothing generic lands in site-packages."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    # a quiet build: setuptools has nothing to warn about (a data folder not declared as a
    # package printed a banner on every install); pip's own lines about this machine's indexes aside
    warned = [line for line in proc.stderr.splitlines() if "warn" in line.lower() and "Location 'file:" not in line]
    assert warned == [], proc.stderr
    (wheel,) = tmp_path.glob("crawltop-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"crawltop"}
    assert all(t == "crawltop" or (t.startswith("crawltop-") and t.endswith(".dist-info")) for t in tops)
    for needed in ("crawltop/core/crawler.py", "crawltop/tui/app.py", "crawltop/tui/app.tcss",
                   "crawltop/cli/main.py", "crawltop/demo/site.py", "crawltop/__init__.py",
                   "crawltop/core/steering/sets/global.txt",  # the curated ignore sets: package data
                   "crawltop/tui/top/top.tcss"):  # the dashboard's stylesheet
        assert needed in names
    # every module of the tree ships (a subpackage missing from pyproject's list would not)
    tree = {f"crawltop/{p.relative_to(ROOT / folder).as_posix()}" if folder == "crawltop"
            else f"crawltop/{folder}/{p.relative_to(ROOT / folder).as_posix()}"
            for folder in FOLDERS for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts}
    assert tree - set(names) == set()
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "crawltop = crawltop.cli:console" in zipfile.ZipFile(wheel).read(entry).decode()


def test_what_a_plain_crawl_never_uses_is_imported_when_first_used() -> None:
    """tldextract brings `requests` and its kin (7 MB of RSS) for downloads crawltop never
    makes; google-re2 and the XML parsers another 2.5 MB. The engine and the headless
    command import none of them (a CDXJ index's `surt` still brings tldextract): a crawl
    scoped by host, without patterns or sitemaps, never loads them, and each still works
    once asked for (BENCHMARKS.md: start-up and memory of a plain crawl)."""
    sitemap = (b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
               b"<url><loc>http://a.example/x</loc></url></urlset>")
    code = f"""
import sys, crawltop.core.crawler, crawltop.cli.main, crawltop.cli.headless
lazy = ("tldextract", "requests", "re2", "defusedxml", "xml.etree.ElementTree")
print([m for m in lazy if m in sys.modules])
from crawltop.core.queueing.scope import Scope
host = Scope(("http://www.example.co.uk/",), "host")
print(host.allows("http://example.co.uk/a"), host.allows("http://shop.example.co.uk/"),
      [m for m in lazy if m in sys.modules])
dom = Scope(("http://www.example.co.uk/",), "domain", exclude=("/private",))
print(dom.allows("http://shop.example.co.uk/"), dom.allows("http://other.co.uk/"),
      dom.allows("http://shop.example.co.uk/private/x"), "tldextract" in sys.modules, "re2" in sys.modules)
from crawltop.core.fetching.sitemaps import parse
print(parse({sitemap!r}).urls, "defusedxml" in sys.modules)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:4] == ["[]", "True False []", "True False False True True",
                                           "['http://a.example/x'] True"], proc.stdout
