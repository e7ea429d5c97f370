"""How the CLI prints: tables that fit any terminal (fit_table.py), the help's format, and one view
per thing shown (runs, studies, launch plans and events, model and deploy plans)."""
