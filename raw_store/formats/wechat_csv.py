"""wechat_csv: WeChat chats as the common open-source exporters write them to CSV.

Two layouts, told apart by the header:
  WeChatMsg (LC044/WeChatMsg, "导出 CSV"): localId,TalkerId,Type,SubType,IsSender,CreateTime,Status,StrContent,
      StrTime[,Remark,NickName,Sender] — Type 1 is text; CreateTime is epoch seconds, StrTime local time.
  PyWxDump (xaoyaoo/PyWxDump): id,MsgSvrID,type_name,is_sender,talker,room_name,msg,src,CreateTime
      (older: …,room_name,content,CreateTime with content a JSON {msg, src}) — type_name in Chinese ("文本", …).
Text messages keep their text; images, voice, video, stickers, files, locations and cards
become bracketed notes ("[image]", "[voice]", …); system messages (Type 10000/10002,
"系统通知", revoked messages) are role "system", speaker "system".
"""

from __future__ import annotations

import json
import re

from raw_store import errors as E
from raw_store.formats import csvrows
from raw_store.formats.base import LINES, Format, ReadResult, Sample, Source, text_problem
from raw_store.timeparse import parse_ts

NAME = "wechat_csv"
RECORD = "every CSV row after the header (a quoted StrContent / msg may span lines)"
WECHATMSG = ("localId", "TalkerId", "Type", "SubType", "IsSender", "CreateTime", "StrContent")
PYWXDUMP = ("type_name", "is_sender", "talker", "CreateTime")
# WeChat message types (Type column) → note; 1 is text, 10000/10002 system
_TYPE_NOTES = {
    3: "[image]",
    34: "[voice]",
    42: "[contact card]",
    43: "[video]",
    47: "[sticker]",
    48: "[location]",
    49: "[link]",
    50: "[audio/video call]",
}
_SYSTEM_TYPES = {10000, 10002}
_TYPE_NAME_NOTES = {
    "图片": "[image]",
    "语音": "[voice]",
    "视频": "[video]",
    "动画表情": "[sticker]",
    "表情包": "[sticker]",
    "文件": "[file]",
    "位置": "[location]",
    "名片": "[contact card]",
    "分享链接": "[link]",
    "卡片式链接": "[link]",
    "音视频通话": "[audio/video call]",
    "语音/视频通话": "[audio/video call]",
    "转账": "[transfer]",
    "红包": "[red packet]",
    "小程序": "[mini program]",
}
_SYSTEM_TYPE_NAMES = {"系统通知", "系统消息", "撤回消息", "撤回", "拍一拍"}
_ROW_START = re.compile(r"^\d*,?\d+,\d+,")  # localId,TalkerId,Type / id,MsgSvrID,…


def _layout(names: list[str] | None) -> str | None:
    if not names:
        return None
    if all(c in names for c in WECHATMSG):
        return "wechatmsg"
    if all(c in names for c in PYWXDUMP) and ("msg" in names or "content" in names):
        return "pywxdump"
    return None


def sniff(s: Sample) -> bool:
    return bool(s.lines) and _layout(csvrows.header(s.lines[0])) is not None


def _xml(text: str) -> bool:
    return text.lstrip().startswith("<")


def _wechatmsg(f: dict[str, str]) -> tuple[str, str, str, object]:
    """(speaker, role, text, time) of a WeChatMsg row."""
    kind = int(f["Type"]) if f["Type"].strip().lstrip("-").isdigit() else -1
    content = f.get("StrContent", "")
    if kind in _SYSTEM_TYPES:
        return "system", "system", ("[system message]" if _xml(content) else content), f["CreateTime"]
    name = (f.get("Remark") or "").strip() or (f.get("NickName") or "").strip() or (f.get("Sender") or "").strip()
    if not name:
        name = "self" if f["IsSender"].strip() == "1" else f"talker:{f['TalkerId'].strip()}"
    if kind == 1 or (kind == 49 and content.strip() and not _xml(content)):
        text = content
    else:
        text = _TYPE_NOTES.get(kind, f"[message type {f['Type'].strip()}]")
    stamp = f["CreateTime"] if f["CreateTime"].strip() else f.get("StrTime", "")
    return name, "user", text, stamp


def _pywxdump(f: dict[str, str]) -> tuple[str, str, str, object]:
    """(speaker, role, text, time) of a PyWxDump row."""
    kind = f["type_name"].strip()
    content = f.get("msg")
    if content is None:  # the older layout: content is a JSON {msg, src}
        try:
            obj = json.loads(f.get("content") or "")
        except (ValueError, RecursionError):
            obj = f.get("content") or ""
        content = obj.get("msg", "") if isinstance(obj, dict) else obj if isinstance(obj, str) else ""
    if kind in _SYSTEM_TYPE_NAMES:
        return "system", "system", content, f["CreateTime"]
    name = f["talker"].strip() or ("self" if f["is_sender"].strip() == "1" else "unknown")
    note = _TYPE_NAME_NOTES.get(kind)
    plain = kind in ("文本", "引用回复", "引用") or (note is None and content.strip() and not _xml(content))
    return name, "user", content if plain else (note or f"[{kind or 'message'}]"), f["CreateTime"]


def read(src: Source) -> ReadResult:
    b = src.builder(NAME)
    names, lines = csvrows.split_header(src.lines)
    layout = _layout(names) or "wechatmsg"
    names = names or list(WECHATMSG)
    conv = src.default_conv
    for row in csvrows.rows(lines, src.data, lambda t: _ROW_START.match(t) is not None):
        if not isinstance(row, csvrows.Row):
            b.reject(row.no, row.offset, E.E_READ_UTF8, "invalid bytes in line", row.raw)
            continue
        if row.fields is None or len(row.fields) != len(names):
            b.reject(row.no, row.offset, E.E_LINE_PARSE, f"not a CSV row of {len(names)} fields", row.raw)
            continue
        fields = dict(zip(names, row.fields))
        speaker, role, text, stamp = (_wechatmsg if layout == "wechatmsg" else _pywxdump)(fields)
        problem = text_problem(text)
        if problem:
            b.reject(row.no, row.offset, problem[0], problem[1], row.raw)
            continue
        try:
            ts = parse_ts(stamp)
        except ValueError as exc:
            b.reject(row.no, row.offset, E.E_TS_PARSE, str(exc)[:200], row.raw)
            continue
        b.message(conv_id=conv, msg_id=f"L{row.no}", speaker=speaker, role=role, ts=ts, text=text.strip(), line=row.no)
    return b.result()


FORMAT = Format(NAME, LINES, RECORD, sniff, read)
