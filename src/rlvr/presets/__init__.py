"""Model presets whose build trains (a layer above :mod:`rlvr.train`).

``tiny`` (:mod:`rlvr.presets.tiny`) is warm-started with the library's own SFT. Each module
registers its preset with :func:`rlvr.models.register_preset` when imported;
:func:`rlvr.models.load_model` imports it the first time the preset's name is asked for.
"""
