"""Event stores: where the log lives (SQLite, PostgreSQL, in memory), their connections,
URLs, retries and saved states.
"""
