"""Run ``llama_cpp.server`` with weight repacking off (the suite starts it through this file).

``python -m llama_cpp.server`` has no switch for llama.cpp's ``use_extra_bufts`` (weight
repacking; llama-server's ``--no-repack``). On a CPU that advertises AMX but whose VM does not
grant it, the AMX repacked weights crash the first matrix product (``ldtilecfg`` faults), so the
suite turns repacking off in both servers. Everything else is ``llama_cpp.server`` unchanged:
this sets one field of the model's default parameters, then runs the server's own ``__main__``
with the arguments given.
"""

import runpy

import llama_cpp.llama_cpp as lib  # type: ignore[import-not-found]

_defaults = lib.llama_model_default_params


def _no_repack():  # type: ignore[no-untyped-def]
    params = _defaults()
    params.use_extra_bufts = False
    return params


lib.llama_model_default_params = _no_repack
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
