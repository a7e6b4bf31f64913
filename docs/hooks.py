"""mkdocs hook: the reference sections rendered from publisher's catalogues (publisher/reference.py)."""

from publisher.reference import render


def on_page_markdown(markdown, page, config, files):
    return render(markdown)
