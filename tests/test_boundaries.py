"""core/ is the engine: it must import and crawl without textual or tui/ present."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('textual', 'tui'):
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
import core, core.crawler, core.stats, core.frontier, core.urls, core.scope, core.robots
import pkgutil
for m in pkgutil.iter_modules(core.__path__):
    __import__('core.' + m.name)
print('ok', sorted(k for k in sys.modules if k.startswith(('textual', 'tui'))))
"""


def test_core_imports_without_textual() -> None:
    proc = subprocess.run([sys.executable, "-c", BLOCK], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok []"


def test_no_textual_import_in_core_source() -> None:
    offenders = [p for p in (ROOT / "core").glob("*.py")
                 if any(line.lstrip().startswith(("import textual", "from textual", "import tui", "from tui"))
                        for line in p.read_text().splitlines())]
    assert offenders == []
