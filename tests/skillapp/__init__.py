"""An app with an ``mcp_skills/`` folder, installed by the skills tests (tests/test_skills.py)."""
