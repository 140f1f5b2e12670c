"""Screens over the main one: dialogs and full-screen lists (`dialogs.py`), the host
queues (`queues.py`, `H`) and the steering prompts (`steer.py`)."""
