"""The team budget's cancel function (deployed alone: see ``main.py``)."""
