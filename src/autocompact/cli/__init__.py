"""The ``autocompact`` command line. Only this package reads the environment, writes to the
terminal or exits; nothing outside it imports it."""
