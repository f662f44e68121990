"""The LangGraph checkpointer: conformance suite, real graphs, bad input."""
