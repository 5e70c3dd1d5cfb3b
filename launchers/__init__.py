"""Command builders (pure functions from config to argv) and campaign planning/submission."""
