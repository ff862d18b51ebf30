"""pytest plugins the suite loads into pytest subprocesses (``-p NAME``, with this folder alone on
``PYTHONPATH``: the helpers beside it would shadow libraries of their names, such as ``attrs``)."""
