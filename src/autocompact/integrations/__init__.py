"""Framework integrations: one module per framework, each behind its own extra.

They translate the framework's messages and call the engine; every decision (estimates, tiers,
compaction, the breaker) stays in the core. Nothing in the core imports this package.
"""
