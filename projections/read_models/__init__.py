"""The read models: the tables each fills from the log, declared once as column lists, and their
registry."""
