"""Cheap, deterministic text facts the raw layer needs: script-based language and token estimates."""

from __future__ import annotations

import re

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
_WORDISH = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[^\s\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def detect_lang(text: str) -> str:
    """'zh' when Han characters carry the message, 'en' when Latin words do, else 'und'.

    Mixed messages go to the script with more weight (a Han char counts as a word):
    「我用 Python 写代码」 is zh, "I love 饺子 so much" is en.
    """
    han = len(_HAN.findall(text))
    latin = len(_LATIN_WORD.findall(text))
    if han == 0 and latin == 0:
        return "und"
    return "zh" if han >= latin else "en"


def estimate_tokens(text: str) -> int:
    """Roughly the number of LLM-style tokens: one per Han character, one per other word run."""
    if text.isascii():  # no Han: the runs between whitespace (str.split and \s agree on what that is)
        return len(text.split())
    return len(_WORDISH.findall(text))
