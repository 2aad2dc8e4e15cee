"""A second team's project, kept as a test fixture: a helpdesk built from startproject the way
docs/howto/tools.md and the tutorial say, with a custom UUID-keyed user model, an admin bridged with
``register_admin`` and function tools, resources and prompts (tests/e2e/test_helpdesk.py)."""
