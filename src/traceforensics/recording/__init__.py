"""Recording traces that answer the question (issue 16): ``capture()`` around a training loop,
and what ``tf record`` injects into a script it runs (docs/recording.md).

The package is named ``recording`` so that ``traceforensics.capture`` stays the function (a
subpackage of that name would replace the function on import). Nothing here imports ``torch``
at import time: ``capture()`` needs it (``pip install 'traceforensics[capture]'``), importing
``traceforensics`` does not.
"""

from traceforensics.recording.recorder import Capture, capture
from traceforensics.recording.settings import CaptureSettings

__all__ = ["Capture", "CaptureSettings", "capture"]
