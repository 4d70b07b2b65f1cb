"""inferlab: the tested code behind the LLM Fast Inference study site.

One module per topic, each meant to be read top to bottom like a chapter:
``models``, ``decoding``, ``kvcache``, ``speculative``, ``flash``, ``paged``, ``bench``.
"""

__version__ = "0.1.0"
