"""Tests of agentledger.integrations.openai_agents (the OpenAI Agents SDK session)."""
