"""Session set-up shared by every test module.

TensorFlow can split the CPU into logical devices only before it initialises,
and pytest imports every test module into one process. The runtime tests need
several logical devices, the front-end tests merely import Keras, so the
devices are configured here, first, for the whole session.
"""

from __future__ import annotations

import os
import signal

# A shell starts a background job (`cmd &`, nohup, a CI runner's child) with SIGINT ignored, and an ignored signal
# is inherited across exec: the Ctrl-C tests' child processes would then never see their SIGINT. Python's own
# handler is reset to the default on exec, so installing it here gives every child a working Ctrl-C.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

from hgpart.runtime.devices import open_devices  # noqa: E402

SESSION_LOGICAL_DEVICES = 4
open_devices("logical", SESSION_LOGICAL_DEVICES, inter_op=4)
