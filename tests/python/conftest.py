"""Shared by the tests of the cxxrun Python package (agent/python/cxxrun/):
the package from the source tree, the heartbeat page's layout as the C
header says it (never the package's own copy, which is what is tested), and
a fake page laid out by it."""
import ctypes
import importlib
import os
import re
import struct
import sys

import pytest

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PACKAGE_DIR = os.path.join(SOURCE, "agent", "python")
HEADER = os.path.join(SOURCE, "common", "heartbeat_layout.h")

sys.dont_write_bytecode = True  # no .pyc in the source tree
if PACKAGE_DIR not in sys.path:
    sys.path.insert(0, PACKAGE_DIR)

_C_TYPES = {"uint64_t": ctypes.c_uint64, "uint32_t": ctypes.c_uint32, "char": ctypes.c_char}


def _macro_value(text):
    text = text.strip()
    if text.startswith('"'):
        return text.strip('"')
    m = re.fullmatch(r"UINT64_C\((\w+)\)", text)
    return int((m.group(1) if m else text).rstrip("uU"), 0)


class HeaderLayout:
    """common/heartbeat_layout.h read as text: its CXXRUN_HEARTBEAT_* macros
    (`macros`, by the name after the prefix) and its two structs as ctypes
    structures with the C compiler's natural alignment (`page`, `section`)."""

    def __init__(self, path=HEADER):
        with open(path) as f:
            text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
        self.macros = {m.group(1): _macro_value(m.group(2))
                       for m in re.finditer(r"^#define CXXRUN_HEARTBEAT_(\w+)[ \t]+(.+)$", text, re.M)}
        structs = {}
        for m in re.finditer(r"struct (cxxrun_heartbeat_\w+) \{(.*?)\};", text, re.S):
            fields = []
            for decl in m.group(2).split(";"):
                decl = decl.replace("CXXRUN_HB_ALIGN8", "").split()
                if not decl:
                    continue
                *type_words, name = decl
                ctype = structs[type_words[1]] if type_words[0] == "struct" else _C_TYPES[type_words[0]]
                array = re.fullmatch(r"(\w+)\[(\w+)\]", name)
                if array:
                    name, count = array.group(1), array.group(2)
                    count = self.macros[count[len("CXXRUN_HEARTBEAT_"):]] if count.startswith("CXXRUN_") else int(count)
                    ctype = ctype * count
                fields.append((name, ctype))
            structs[m.group(1)] = type(m.group(1), (ctypes.Structure,), {"_fields_": fields})
        self.page = structs["cxxrun_heartbeat_page"]
        self.section = structs["cxxrun_heartbeat_section"]

    def offset(self, field, slot=None):
        """The byte offset of a page field, or of a field of section `slot`."""
        if slot is None:
            return getattr(self.page, field).offset
        return self.page.sections.offset + slot * ctypes.sizeof(self.section) + getattr(self.section, field).offset


LAYOUT = HeaderLayout()
_FORMATS = {ctypes.c_uint64: "=Q", ctypes.c_uint32: "=I"}


class FakePage:
    """A heartbeat page file as the agent makes it (zeroed, then version,
    section count and magic), read back field by field at the header's offsets."""

    def __init__(self, path, magic=None, version=None, section_count=None, judged=1):
        self.path = path
        m = LAYOUT.macros
        with open(path, "wb") as f:
            f.write(bytes(m["PAGE_SIZE"]))
        self.write("version", m["VERSION"] if version is None else version)
        self.write("section_count", m["SECTIONS"] if section_count is None else section_count)
        self.write("judged", judged)
        self.write("magic", m["MAGIC"] if magic is None else magic)

    def _field(self, field, slot):
        struct_type = LAYOUT.page if slot is None else LAYOUT.section
        return _FORMATS[dict(struct_type._fields_)[field]], LAYOUT.offset(field, slot)

    def read(self, field, slot=None):
        with open(self.path, "rb") as f:
            data = f.read()
        if field == "name":
            raw = data[LAYOUT.offset("name", slot):][:LAYOUT.macros["NAME_MAX"]]
            return raw.split(b"\0", 1)[0].decode()
        fmt, at = self._field(field, slot)
        return struct.unpack_from(fmt, data, at)[0]

    def write(self, field, value, slot=None):
        fmt, at = self._field(field, slot)
        with open(self.path, "r+b") as f:
            f.seek(at)
            f.write(struct.pack(fmt, value))


def fresh_cxxrun():
    """The package imported anew: it looks for its page again, in the
    environment as it is now."""
    for name in [n for n in sys.modules if n == "cxxrun" or n.startswith("cxxrun.")]:
        del sys.modules[name]
    return importlib.import_module("cxxrun")


@pytest.fixture
def outside(monkeypatch):
    """cxxrun as outside a cxxrun worker: no page in the environment."""
    monkeypatch.delenv(LAYOUT.macros["ENV"], raising=False)
    return fresh_cxxrun()


@pytest.fixture
def page(tmp_path, monkeypatch):
    """A fake page in CXXRUN_HEARTBEAT_FILE, as the agent gives a worker."""
    p = FakePage(str(tmp_path / "rank0.1"))
    monkeypatch.setenv(LAYOUT.macros["ENV"], p.path)
    return p


@pytest.fixture
def cxxrun(page):
    """The package inside a cxxrun worker whose page is `page`."""
    return fresh_cxxrun()
