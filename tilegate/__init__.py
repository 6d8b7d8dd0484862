"""tilegate: a CI gate for TileLang attention kernels on AMD gfx942 (MI300X) served by SGLang.

The gate's folders (kernels/, references/, fixtures/, suite/) sit at the top of the
checkout and are imported only as ``tilegate.kernels`` and so on. They carry no
``__init__.py`` on purpose: a folder without one can never win an import over a real
package, so a checkout on ``sys.path`` cannot shadow Hugging Face's ``kernels`` that
SGLang imports (``from kernels import get_kernel``).
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
__path__.append(str(REPO_ROOT))  # type: ignore[name-defined]  # tilegate.kernels -> ./kernels
