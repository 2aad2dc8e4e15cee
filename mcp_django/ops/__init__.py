"""Operations: what a team running the server watches and limits.

What lives here: the audit trail of every request (``audit/``), OpenTelemetry spans and metrics
(``tracing``) and the observer hook both hang on (``observation``), and quotas (``quotas/``:
the limits and when to refuse, the counters of each cache backend, and the batches a process
takes from a shared cache).

What it may import: the server's lower pieces (``context``, ``entries``, ``rounds``,
``principal``), ``stores``, the foundations at the package root and the protocol core. The
engine calls into ``ops``; nothing here imports the engine, the registry or the transports.
"""
