"""The registry of input formats: which formats memctl reads, and the order detection tries them in.

Behaviour lives in one module per format (`raw_store/formats/<name>.py`, each declaring a
`FORMAT`); registering is only this list. Order matters where two formats could claim a
file: JSON documents first (by their keys), then JSON lines (SillyTavern before canonical),
CSV exports (by their header row), then the text exports, the loosest (`Speaker: text`
transcripts) last. A file no format claims is "unknown" — one E_FORMAT_UNKNOWN reject.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from raw_store.formats import (
    canonical_jsonl,
    chatgpt_json,
    claude_json,
    discord_csv,
    discord_json,
    line_txt,
    locomo_json,
    messenger_json,
    qq,
    sillytavern_jsonl,
    telegram_json,
    transcript,
    wechat_csv,
    whatsapp,
)
from raw_store.formats.base import DOCUMENT, UNKNOWN, Format, Sample


class Registry:
    """Formats by name, in detection order."""

    def __init__(self, formats: Iterable[Format] = ()) -> None:
        self._formats: dict[str, Format] = {}
        for f in formats:
            self.register(f)

    def register(self, fmt: Format) -> None:
        if fmt.name in self._formats or fmt.name == UNKNOWN:
            raise ValueError(f"format name taken: {fmt.name}")
        self._formats[fmt.name] = fmt

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._formats)

    def __getitem__(self, name: str) -> Format:
        return self._formats[name]

    def __iter__(self) -> Iterator[Format]:
        return iter(self._formats.values())

    def detect(self, sample: Sample) -> str:
        """The first format whose sniff claims the sample; a JSON document only by a document format."""
        for f in self._formats.values():
            if (f.kind == DOCUMENT or not sample.document) and f.sniff(sample):
                return f.name
        return UNKNOWN


REGISTRY = Registry(
    [
        locomo_json.FORMAT,
        chatgpt_json.FORMAT,
        claude_json.FORMAT,
        telegram_json.FORMAT,
        discord_json.FORMAT,
        messenger_json.FORMAT,
        sillytavern_jsonl.FORMAT,
        canonical_jsonl.FORMAT,
        wechat_csv.FORMAT,
        discord_csv.FORMAT,
        line_txt.FORMAT,
        qq.FORMAT,
        whatsapp.FORMAT,
        transcript.FORMAT,
    ]
)
