"""`lineage serve`: the web application, its SVG charts, page templates and static files."""
