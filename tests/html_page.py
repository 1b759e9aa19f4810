"""Reading a `lineage report` page (or the DOM a browser dumped of it) back as elements, with the
stdlib parser."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: list[str] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class Page(HTMLParser):
    """Every element in document order, each with the text directly and indirectly inside it."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.elements.append(element)
        if tag not in {"meta", "br", "img", "link", "input", "rect", "line"}:
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i].tag == tag:
                del self._open[i:]
                break

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element.text.append(data)

    def find(self, tag: str, css: str | None = None) -> list[Element]:
        return [e for e in self.elements if e.tag == tag and (css is None or css in e.classes)]

    def text_of(self, element: Element) -> str:
        return "".join(element.text)


def external_references(page: Page) -> list[str]:
    """Anything that would make the browser fetch: src, non-anchor href, link, script, url(...) in
    style."""
    found = []
    for element in page.elements:
        if element.tag in {"script", "link", "iframe", "object", "embed", "img"}:
            found.append(f"<{element.tag}>")
        for name, value in element.attrs.items():
            if name in {"src", "srcset", "action", "xlink:href"}:
                found.append(f"{name}={value}")
            if name == "href" and not value.startswith("#"):
                found.append(f"href={value}")
    for style in page.find("style"):
        if "url(" in page.text_of(style) or "@import" in page.text_of(style):
            found.append("style url()")
    return found
