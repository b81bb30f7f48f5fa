"""WhatsApp's generated texts in en, de, es, fr, pt, it, nl, ru, tr, zh, ja, id: media placeholders, deleted
notices, the encryption notice and group events.

Collected with the phrase tables of maintained parsers as reference (starkdmi/whats_json
`lib/src/patterns.dart`, built from WhatsApp's own iOS Localizable.strings / Android
strings.xml; mlomb/chat-analytics `pipeline/parse/parsers/WhatsApp.ts`). The reader
prefers structure — an Android line without `Name:` is a system line whatever its
language — and uses these lists where an export has no structure to go by: iOS writes a
group event as `GroupName: ‎<event>` and media as `Name: ‎image omitted`.
"""

from __future__ import annotations

import re

# iOS "<kind> omitted" texts (the whole message, after the left-to-right mark), by the note they become
MEDIA = {
    "[image]": [
        "image omitted",
        "Bild weggelassen",
        "imagen omitida",
        "image absente",
        "imagem não revelada",
        "imagem ocultada",
        "immagine omessa",
        "afbeelding weggelaten",
        "изображение отсутствует",
        "görüntü dahil edilmedi",
        "圖片已略去",
        "圖像已省略",
        "照片已忽略",
        "画像は含まれていません",
        "gambar tidak disertakan",
    ],
    "[video]": [
        "video omitted",
        "Video weggelassen",
        "video omitido",
        "vidéo absente",
        "vídeo não revelado",
        "vídeo omitido",
        "video omesso",
        "video weggelaten",
        "видео отсутствует",
        "video dahil edilmedi",
        "影片已略去",
        "影片已省略",
        "视频已忽略",
        "ビデオは含まれていません",
        "video tidak disertakan",
    ],
    "[audio]": [
        "audio omitted",
        "Audio weggelassen",
        "audio omitido",
        "audio omis",
        "ficheiro de áudio não revelado",
        "áudio ocultado",
        "audio omesso",
        "audio weggelaten",
        "аудиофайл отсутствует",
        "аудио отсутствует",
        "ses dahil edilmedi",
        "音訊已略去",
        "音訊已省略",
        "音频已忽略",
        "音声は含まれていません",
        "audio tidak disertakan",
    ],
    "[sticker]": [
        "sticker omitted",
        "Sticker weggelassen",
        "sticker omitido",
        "sticker omis",
        "sticker não revelado",
        "figurinha omitida",
        "sticker non incluso",
        "sticker weggelaten",
        "стикер не добавлен",
        "çıkartma dahil edilmedi",
        "貼圖已略去",
        "貼圖已忽略",
        "贴图已省略",
        "スタンプは含まれていません",
        "stiker tidak disertakan",
    ],
    "[GIF]": [
        "GIF omitted",
        "GIF weggelassen",
        "GIF omitido",
        "GIF retiré",
        "GIF omis",
        "GIF não revelada",
        "GIF esclusa",
        "GIF weggelaten",
        "GIF отсутствует",
        "GIF dahil edilmedi",
        "GIF 已略去",
        "GIF 圖片已被省略",
        "GIF 动态图已被忽略",
        "GIFは含まれていません",
        "GIF tidak disertakan",
    ],
    "[document]": [
        "document omitted",
        "Dokument weggelassen",
        "documento omitido",
        "document manquant",
        "document omis",
        "documento não revelado",
        "documento omesso",
        "document weggelaten",
        "документ отсутствует",
        "belge dahil edilmedi",
        "文件已略去",
        "文件已忽略",
        "文档已省略",
        "ドキュメントは含まれていません",
        "dokumen tidak disertakan",
    ],
    "[contact card]": [
        "Contact card omitted",
        "Kontaktkarte ausgelassen",
        "Kontaktkarte weggelassen",
        "Tarjeta de contacto omitida",
        "Fiche contact manquante",
        "Contacto não revelado",
        "Cartão do contato omitido",
        "Scheda contatto omessa",
        "Visitekaartje weggelaten",
        "Карточка контакта отсутствует",
        "Kişi kartı dahil edilmedi",
        "聯絡人卡片已略去",
        "聯絡人卡片已省略",
        "联系人卡片已忽略",
        "連絡先カードを省略",
        "Kartu kontak tidak disertakan",
    ],
}
# Android "<Media omitted>" (the whole first line of the message)
ANDROID_MEDIA = [
    "<Media omitted>",
    "<Medien ausgeschlossen>",
    "<Medien weggelassen>",
    "<Multimedia omitido>",
    "<Archivo omitido>",
    "<Médias omis>",
    "<Fichier omis>",
    "<Mídia oculta>",
    "<Mídia omitida>",
    "<Ficheiro não revelado>",
    "<Media omessi>",
    "<Media omesso>",
    "<Media weggelaten>",
    "<Без медиафайлов>",
    "<Файл пропущен>",
    "<Medya dahil edilmedi>",
    "<Medya atlanmış>",
    "<省略多媒体文件>",
    "<忽略多媒體檔>",
    "<メディアなし>",
    "<メディアは含まれていません>",
    "<Media tidak disertakan>",
]
DELETED = [
    "This message was deleted",
    "You deleted this message",
    "Diese Nachricht wurde gelöscht",
    "Du hast diese Nachricht gelöscht",
    "Se eliminó este mensaje",
    "Eliminaste este mensaje",
    "Este mensaje fue eliminado",
    "Ce message a été supprimé",
    "Vous avez supprimé ce message",
    "Esta mensagem foi apagada",
    "Mensagem apagada",
    "Você apagou esta mensagem",
    "Apagou esta mensagem",
    "Questo messaggio è stato eliminato",
    "Hai eliminato questo messaggio",
    "Dit bericht is verwijderd",
    "U hebt dit bericht verwijderd",
    "Je hebt dit bericht verwijderd",
    "Данное сообщение удалено",
    "Это сообщение удалено",
    "Вы удалили данное сообщение",
    "Вы удалили это сообщение",
    "Bu mesaj silindi",
    "Bu mesajı sildiniz",
    "此訊息已刪除",
    "这条消息已被删除",
    "您已刪除此訊息",
    "您已删除这条消息",
    "信息已删除",
    "このメッセージは削除されました",
    "このメッセージを削除しました",
    "Pesan ini dihapus",
    "Pesan ini telah dihapus",
    "Anda menghapus pesan ini",
    "Anda telah menghapus pesan ini",
]
# the encryption notice ("Messages and calls are end-to-end encrypted. …"): it always names WhatsApp too
ENCRYPTION = [
    "end-to-end encrypted",
    "end-to-end encryption",
    "Ende-zu-Ende-verschlüsselt",
    "Ende-zu-Ende-Verschlüsselung",
    "cifrados de extremo a extremo",
    "cifrado de extremo a extremo",
    "chiffrés de bout en bout",
    "chiffrement de bout en bout",
    "encriptadas ponto a ponto",
    "criptografia de ponta a ponta",
    "criptografia de ponta-a-ponta",
    "crittografati end-to-end",
    "crittografia end-to-end",
    "end-to-end versleuteld",
    "end-to-end encryptie",
    "сквозным шифрованием",
    "uçtan uca şifreli",
    "uçtan uca şifreleme",
    "端到端加密",
    "端對端加密",
    "端對端的加密",
    "端对端的加密",
    "エンドツーエンド暗号化",
    "エンドツーエンドの暗号化",
    "terenkripsi secara end-to-end",
    "enkripsi end-to-end",
]
# group events and notices, as iOS writes them after a left-to-right mark (substrings, any case)
EVENTS = [
    # en
    "created group",
    "created this group",
    " added ",
    " added",
    "removed",
    " left",
    "joined using",
    "changed the subject",
    "changed this group's icon",
    "changed the group description",
    "changed their phone number",
    "changed the group settings",
    "changed this group's settings",
    "deleted this group's icon",
    "security code",
    "now an admin",
    "disappearing messages",
    "pinned a message",
    "message timer",
    # de
    "hinzugefügt",
    "entfernt",
    "hat die Gruppe",
    "beigetreten",
    "den Betreff",
    "das Gruppenbild",
    "die Gruppenbeschreibung",
    "Sicherheitsnummer",
    "jetzt Admin",
    "selbstlöschende Nachrichten",
    "seine Telefonnummer",
    "ihre Telefonnummer",
    # es
    "añadió",
    "eliminó a",
    "salió del grupo",
    "se unió",
    "creó el grupo",
    "cambió el asunto",
    "cambió el ícono",
    "cambió la imagen",
    "cambió la descripción",
    "código de seguridad",
    "ahora eres admin",
    "mensajes temporales",
    # fr
    "a ajouté",
    "a retiré",
    "est parti",
    "a rejoint",
    "a créé le groupe",
    "le sujet",
    "l'icône de ce groupe",
    "la description du groupe",
    "code de sécurité",
    "désormais admin",
    "messages éphémères",
    # pt
    "adicionou",
    "removeu",
    "saiu",
    "entrou usando",
    "criou o grupo",
    "o assunto",
    "a imagem do grupo",
    "a descrição do grupo",
    "código de segurança",
    "agora é admin",
    "mensagens temporárias",
    # it
    "ha aggiunto",
    "ha rimosso",
    "è uscit",
    "si è unit",
    "ha creato il gruppo",
    "l'oggetto",
    "l'immagine del gruppo",
    "l'immagine di questo gruppo",
    "la descrizione del gruppo",
    "codice di sicurezza",
    "amministratore",
    "messaggi effimeri",
    # nl
    "toegevoegd",
    "verwijderd",
    "heeft de groep verlaten",
    "is vertrokken",
    "neemt deel via",
    "aangemaakt",
    "het onderwerp",
    "de groepsafbeelding",
    "de groepsbeschrijving",
    "beveiligingscode",
    "nu beheerder",
    "verdwijnende berichten",
    # ru
    "добавил",
    "удалил",
    "вышел",
    "вышла",
    "присоединил",
    "создал",
    "изменил",
    "код безопасности",
    "администратор",
    "исчезающие сообщения",
    # tr
    "ekledi",
    "çıkardı",
    "ayrıldı",
    "katıldı",
    "oluşturdu",
    "konuyu",
    "grup simgesini",
    "grup açıklamasını",
    "güvenlik kodu",
    "yöneticisiniz",
    "süreli mesajlar",
    # zh (zh-CN / zh-TW)
    "创建了群组",
    "创建了此群组",
    "建立了群組",
    "添加了",
    "新增了",
    "移除了",
    "退出了",
    "已退出",
    "已離開",
    "加入了",
    "已加入",
    "更改了",
    "變更了",
    "安全代码",
    "安全碼",
    "管理员",
    "管理員",
    "限时消息",
    "限時訊息",
    # ja
    "を追加しました",
    "を削除しました",
    "退出しました",
    "参加しました",
    "を作成しました",
    "を変更しました",
    "セキュリティコード",
    "管理者",
    "消えるメッセージ",
    # id
    "menambahkan",
    "mengeluarkan",
    "keluar",
    "bergabung",
    "membuat grup",
    "mengubah subjek",
    "mengubah ikon",
    "mengubah deskripsi",
    "kode keamanan",
    "sekarang admin",
    "pesan sementara",
]


def _alternation(phrases: list[str]) -> str:
    return "|".join(re.escape(p) for p in sorted(set(phrases), key=len, reverse=True))


def _key(text: str) -> str:
    return text.strip().rstrip(".。").strip().casefold()


MEDIA_NOTES = {_key(p): note for note, phrases in MEDIA.items() for p in phrases}
DOCUMENT_ENDING = re.compile(rf"^(?P<name>.*?)\s*(?:{_alternation(MEDIA['[document]'])})$", re.S | re.I)
_DOCUMENT_KEYS = tuple(_key(p) for p in MEDIA["[document]"])
_FILE_NAME = re.compile(r"\S\.\w{1,8}(?:\s|$)")  # "Plan.pdf", "Plan.pdf • 2 pages"
ANDROID_MEDIA_KEYS = frozenset(_key(p) for p in ANDROID_MEDIA)
DELETED_KEYS = frozenset(_key(p) for p in DELETED)
ENCRYPTION_RE = re.compile(_alternation(ENCRYPTION), re.I)
EVENTS_RE = re.compile(_alternation(EVENTS), re.I)


def media_note(first_line: str) -> str | None:
    """The bracketed note for a media placeholder or deleted notice ("[image]", "[document: Plan.pdf]",
    "[deleted message]"), or None when the line is a message's own text."""
    first_line = first_line.replace("\u200e", "").replace("\u200f", "")  # iOS marks every generated piece
    key = _key(first_line)
    if key in MEDIA_NOTES:
        return MEDIA_NOTES[key]
    if key in ANDROID_MEDIA_KEYS or key.strip("<>").strip() in MEDIA_NOTES:
        return MEDIA_NOTES.get(key.strip("<>").strip(), "[media]")
    if key in DELETED_KEYS:
        return "[deleted message]"
    if not key.endswith(_DOCUMENT_KEYS):
        return None
    m = DOCUMENT_ENDING.match(first_line.strip())  # iOS puts the file name before "document omitted"
    if m and _FILE_NAME.search(m.group("name")):
        return f"[document: {m.group('name').strip()}]"
    return None


def is_encryption_notice(text: str) -> bool:
    return "whatsapp" in text.casefold() and ENCRYPTION_RE.search(text) is not None


def is_event(text: str) -> bool:
    """A group event or notice in one of the covered languages (checked only on texts iOS marks as generated)."""
    return ENCRYPTION_RE.search(text) is not None or EVENTS_RE.search(text) is not None
