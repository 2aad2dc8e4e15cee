"""Quotas: rate limits on ``tools/call`` and caps on what one caller holds open.

``limits`` decides what to count and when to refuse, ``backends`` keeps the counters (one
backend per cache: in this process, any Django cache, Redis), and ``batches`` takes units from a
shared cache several at a time so that a call rarely needs a round trip. Imports point down that
list; only ``backends`` talks to a cache.
"""
