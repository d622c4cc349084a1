"""The annotated trace (``tf analyze --annotate``): the input's events plus tf's tracks as one
Chrome-trace JSON file (``document.write_annotated``; tracks: ``tracks``; places and clock:
``layout``; the event table as Chrome events: ``table``)."""
