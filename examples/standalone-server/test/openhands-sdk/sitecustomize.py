# Python imports this at start when its directory is on PYTHONPATH (the OpenHands CLI's process).
import loopback_names  # noqa: F401
