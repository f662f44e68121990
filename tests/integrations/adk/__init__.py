"""The Google ADK session service: its contract, a Runner, processes."""
