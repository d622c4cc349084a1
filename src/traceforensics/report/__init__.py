"""Renderers: turn an ``Analysis`` into terminal text, Markdown, JSON or plots."""
