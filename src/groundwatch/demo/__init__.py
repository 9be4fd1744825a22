"""``groundwatch demo``: simulated production traffic through a real LangChain RAG chain."""
