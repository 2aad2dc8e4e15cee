"""Tasks (MCP 2025-11-25 and 2026-07-28): a tool call that runs on and is polled for its result.

``runner`` runs a task-augmented call, in this process or as a job on Django's task framework,
and answers ``tasks/*``; ``store`` keeps its row, its owner's authorization and the sealed input
it waits on. The worker's job itself is ``mcp_django.task_worker.run_mcp_task``: it stays at the
package root because queued jobs name it by that dotted path.
"""
