"""What the tests and the benchmarks share: plain modules, no pytest fixtures, importable from
both (the repository's root is on ``sys.path`` for each).

- :mod:`testkit.fake_openai`: a deterministic OpenAI-compatible server and the server profiles
  the LLM judge is tested against;
- :mod:`testkit.zh_cases`: the Chinese paraphrase vs hallucination cases;
- :mod:`testkit.chains`: real LangChain chains with fake models and real retrievers.
"""
